// OrderDesk: when an order to an agent (a launch, a kill, a file update)
// goes out through the backend. Now, unless:
// - the node's registration is being decided (HoldFor): its orders wait for
//   the answer, as an agent takes anything before it as a refusal, and go
//   after it (ReleaseHeld: to the registered stream, or to the one before a
//   refusal where it is still there);
// - orders wait for the store (ServerConfig::launch_after_durable, with
//   etcd): an order waits in the OrderQueue for the write that holds what
//   led to it (the next one when changes wait to be written, else the one in
//   flight), so a leader that dies first leaves nothing done that the next
//   one does not know; the persister's answer releases them (WriteDone). A
//   launch released goes only if its task is still placed as it says and
//   its job is not being stopped (killed, preempted, moved off a node, or
//   placed again meanwhile).
// An order to a node whose agent is not connected is dropped: what it
// missed is caught up when it registers (ControlState::CatchUp). Part of the
// control state: single-threaded, no I/O of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/service.pb.h"
#include "server/control/job_map.h"
#include "server/control/node_table.h"
#include "server/control/order_queue.h"
#include "server/control/persister.h"
#include "server/execution_backend.h"

namespace trainyard::server {

class OrderDesk {
 public:
  // REQUIRES: all outlive this object (they are the control state's).
  OrderDesk(bool after_durable, const Persister& persister, const NodeTable& nodes, JobMap& jobs,
            ExecutionBackend* backend)
      : after_durable_(after_durable), persister_(persister), nodes_(nodes), jobs_(jobs), backend_(backend) {}

  // Sends `order` now, or holds or queues it (above).
  void Order(DeferredOrder order);
  void Kill(const std::string& node, const v1::KillTask& kill);

  // The registration of `node` is being decided: its orders are held.
  void HoldFor(const std::string& node) { registering_ = node; }
  // The backend has the answer (or the refusal): what was held goes, and
  // nothing more is held.
  void ReleaseHeld();
  // Write `written` was answered (`ok`): the orders that waited for it go.
  void WriteDone(uint64_t written, bool ok);

  size_t queued() const { return queue_.size(); }

 private:
  // The write an order waits for now (0: none).
  uint64_t WriteToWaitFor() const;
  void Send(DeferredOrder& order, bool deferred);

  const bool after_durable_;
  const Persister& persister_;
  const NodeTable& nodes_;
  JobMap& jobs_;
  ExecutionBackend* const backend_;
  OrderQueue queue_;
  std::string registering_;  // "" none
  std::vector<DeferredOrder> held_;
};

}  // namespace trainyard::server
