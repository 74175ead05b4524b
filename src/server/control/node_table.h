// NodeTable: the nodes the control state knows, their runtime records
// (NodeRt) and the rules that read only a node's own record: how it is
// shown (state and reason), whether it takes new tasks, and how its silence
// is judged (from its last heartbeat, excused for the server's own stalls).
// No I/O, no scheduler, no jobs: what follows from a rule (a node lost, the
// scheduler told) is ControlState's, which holds the table.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/resources/port_ranges.h"
#include "proto/service.pb.h"

namespace trainyard::server {

// One node's runtime record.
struct NodeRt {
  v1::NodeInfo info;
  uint64_t session = 0;          // the agent's connection; 0 while disconnected
  // When its silence is judged from: the last heartbeat, moved forward by
  // the time the server could not read (ExcuseStall, ExcuseOverload).
  absl::Time last_heartbeat;
  absl::Time heard;  // its last heartbeat as it was (bounds ExcuseOverload)
  v1::NodeState state = v1::NODE_READY;
  bool in_scheduler = false;
  core::PortRanges ports_in_use;
  uint64_t busy_gpus = 0;      // excluded in the scheduler
  // The GPUs its agent last said are busy (registration, full heartbeats):
  // a delta heartbeat leaves them out, and a node that was out of the
  // scheduler when they changed takes them on its next heartbeat.
  uint64_t reported_busy_gpus = 0;
  // GPUs a launch here was refused for because another task of the agent
  // holds them (TaskStatus.gpus_held: one the server does not count here,
  // launched by a leader that died): out of placement until the agent lists
  // no task the server does not count here (Reconcile).
  uint64_t held_gpus = 0;
  absl::Time registered;
  // The view last published and what it was built from (see NodeViewSig):
  // a node whose view would not change is not built again.
  std::shared_ptr<const v1::NodeView> view;
  uint64_t view_sig = 0;
  bool view_touched = false;  // a job's tasks here changed: check at the next publication
  // Its agent said it is stopping (Draining, with its reason); Drained was
  // sent once none of its tasks were left. Cleared when it registers again.
  // Not an admin's drain (below): that one keeps the agent running.
  bool agent_stopping = false;
  std::string stop_reason;
  bool drained_sent = false;
  // An admin's cordon or drain (persisted) and its reason.
  bool cordoned = false;
  bool draining = false;
  std::string admin_reason;
  uint64_t cordoned_gpus = 0;  // single GPUs an admin cordoned (persisted)
  // The server's own reasons to keep new tasks off the node: launches that
  // failed for a reason of the node (launch_faults in a row, the last one's
  // message), and too little free disk in the agent's data dir.
  int launch_faults = 0;
  std::string fault_reason;
  std::string disk_reason;
  int64_t data_free_mb = -1;
  // Its agent's GPU faults (info.gpu_faults): the GPUs they take out of
  // service, and why the node is drained when one asks for that ("" none).
  // busy_gpus above is what the core has excluded of these and reported_busy_gpus.
  uint64_t faulty_gpus = 0;
  std::string health_reason;
  bool connected() const { return session != 0; }
  bool degraded() const { return !fault_reason.empty() || !disk_reason.empty(); }
};

class NodeTable {
 public:
  using Map = std::map<std::string, std::unique_ptr<NodeRt>>;

  NodeRt* Find(const std::string& name);
  const NodeRt* Find(const std::string& name) const;
  NodeRt& Add(const std::string& name, std::unique_ptr<NodeRt> node);
  void Remove(const std::string& name);
  size_t size() const { return nodes_.size(); }
  // By name: views list nodes in this order.
  Map::iterator begin() { return nodes_.begin(); }
  Map::iterator end() { return nodes_.end(); }
  Map::const_iterator begin() const { return nodes_.begin(); }
  Map::const_iterator end() const { return nodes_.end(); }

  // LOST over DRAINING (an admin's drain, its agent stopping, a GPU fault
  // that drains) over CORDONED over DEGRADED (launch faults, low disk) over
  // READY.
  static v1::NodeState ShownState(const NodeRt& node);
  // Every reason that keeps it from READY, "; "-joined.
  static std::string ShownReason(const NodeRt& node);
  // Whether the scheduler may place new tasks on it: connected, READY,
  // its agent not stopping, not cordoned, drained, degraded or unhealthy.
  static bool TakesTasks(const NodeRt& node);

  // The server did not run for `gap` (a stall it measured): no READY
  // node's silence counts it.
  void ExcuseStall(absl::Duration gap);
  // The server could not read for `gap` (an overload): READY nodes' silence
  // is moved forward by it, up to `now`, and never so far that a node heard
  // from `silence_factor` timeouts ago would still be READY.
  void ExcuseOverload(absl::Duration gap, absl::Time now, absl::Duration timeout, int silence_factor);
  // The READY nodes silent for longer than `timeout` at `now`, by name.
  std::vector<NodeRt*> SilentPast(absl::Time now, absl::Duration timeout);

 private:
  Map nodes_;
  // The same nodes, hashed, for the lookups of every event.
  absl::flat_hash_map<std::string, NodeRt*> index_;
};

}  // namespace trainyard::server
