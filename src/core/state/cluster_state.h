// ClusterState: the scheduler's whole world as values — nodes (resources,
// free-GPU bitmap, topology, labels, rack, schedulable flag), running jobs
// with their task allocations, and pending jobs. Every update costs
// O(what changed): nodes sit in a NodeIndex keyed by their free GPU groups
// so a placement never scans the cluster, and usage per queue and per user
// is kept as allocations come and go.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/port_ranges.h"
#include "core/resources/resource.h"
#include "core/state/job.h"
#include "core/state/labels.h"
#include "core/state/node_index.h"

namespace trainyard::core {

// memory, vcores and gpus of r; mask and ports dropped.
inline Resource ScalarsOf(const Resource& r) {
  return Resource{.memory_mb = r.memory_mb, .vcores_milli = r.vcores_milli, .gpus = r.gpus};
}
// Scalar sum and difference (mask and ports of the result are empty).
inline Resource AddScalars(const Resource& a, const Resource& b) {
  return Resource{.memory_mb = a.memory_mb + b.memory_mb,
                  .vcores_milli = a.vcores_milli + b.vcores_milli,
                  .gpus = a.gpus + b.gpus};
}
inline Resource SubtractScalars(const Resource& a, const Resource& b) {
  return Resource{.memory_mb = a.memory_mb - b.memory_mb,
                  .vcores_milli = a.vcores_milli - b.vcores_milli,
                  .gpus = a.gpus - b.gpus};
}

// A node as an agent reports it.
struct NodeSpec {
  std::string name;
  std::string rack;  // "" = no rack
  Labels labels;
  // memory_mb, vcores_milli, gpus, gpu_mask (the GPUs offered; 0 = all
  // GPUs of the topology) and ports (the range the node serves).
  Resource capacity;
  GpuTopology topology;  // gpu_count() == capacity.gpus
  bool schedulable = true;
  std::string gpu_model;      // "" = unknown
  int64_t gpu_memory_mb = 0;  // per GPU; 0 = unknown (shares' memory then unchecked)
};

// One task placed on a node (public form, node by name).
struct TaskAssignment {
  std::string role;
  int32_t index = 0;    // 0..count-1 within the role
  std::string node;
  Resource allocation;  // memory, vcores, gpus, exact gpu_mask, exact ports
};



using NodeId = int32_t;
using JobSlot = int32_t;

enum class JobPhase : int8_t {
  kPending,     // waiting to be placed
  kRunning,     // placed; holds its allocations
  kPreempting,  // chosen as a victim; holds its allocations until requeued
};

// A task on a node, with the scalars it holds there, so a scan over nodes
// (preemption) needs no trip to the job.
struct NodeTask {
  JobSlot job = -1;
  int32_t pos = 0;  // index into the job's tasks
  int32_t gpus = 0;
  int64_t memory_mb = 0;
  int64_t vcores_milli = 0;
  int32_t gpu_milli = 0;  // a share of one GPU (gpus == 0)
};

// The few job fields a scan over many jobs reads, kept apart from JobState
// so the scan stays in cache.
struct JobBrief {
  PriorityClass priority = PriorityClass::kIteration;
  JobPhase phase = JobPhase::kPending;
  int32_t queue = 0;
  int32_t gpus = 0;  // GPUs held now
  absl::Time start_time;  // when its current run began
  bool checkpoints = false;  // JobRequest::checkpoints
  bool last_preemption = false;  // JobRequest::last_preemption, as SetLastPreemption left it
  bool elastic = false;          // JobRequest::elastic
};

// Ports a task left on a node, kept from count requests until `until`
// (InfiniteFuture until the next Schedule(now) dates them).
struct CoolingPorts {
  PortRanges ports;
  absl::Time until = absl::InfiniteFuture();
};

// Internal per-node record. Policies read it; only ClusterState writes it.
struct NodeState {
  std::string name;
  int32_t rack = -1;         // index into racks(); -1 = none
  int32_t labels = 0;        // index into label_sets()
  int32_t topology = 0;      // index into topologies()
  Resource capacity;
  Resource free;             // free.gpu_mask is the free-GPU bitmap
  bool schedulable = true;
  bool present = false;      // false once removed (slot reused later)
  JobSlot reserved_for = -1; // a reservation holds this node for a job
  uint64_t excluded = 0;     // GPUs out of service (busy with unknown work, faulty, cordoned)
  std::vector<NodeTask> tasks;
  int32_t gpu_model = -1;    // index into gpu_models(); -1 = unknown
  int64_t gpu_memory_mb = 0; // per GPU; 0 = unknown
  // GPUs holding shares. Such a GPU is out of free.gpu_mask (the whole-GPU
  // view), so a whole-GPU request never lands on it; it returns there when
  // its last share is released.
  uint64_t shared = 0;
  // Per GPU (sized gpu count on the first share): milli and GPU memory held
  // by shares.
  std::vector<int16_t> share_used;
  std::vector<int64_t> share_memory_used;
  // The free GPU share this node adds to ClusterState::ModelFreeShare()
  // and FreeShareTotal() (0 when not schedulable).
  int64_t counted_free_share = 0;

  // Free share of GPU g: 1000 when whole and free, 1000 - used when shared,
  // 0 when held whole or out of service.
  int32_t FreeShare(int g) const {
    uint64_t bit = uint64_t{1} << g;
    if (free.gpu_mask & bit) return 1000;
    return (shared & bit) ? 1000 - share_used[g] : 0;
  }
};

// What of allocation `a` is not free on `node`, or "" when all of it is
// (its ports against free.ports, which holds ports in use as well). A share
// is free when its GPU has that much share left. `reclaimable`: GPUs out of
// service that no task holds, counted as free too (a task's own allocation
// put back: ClusterState::ReclaimableGpus).
std::string NotFree(const Resource& a, const NodeState& node, uint64_t reclaimable = 0);

// The ports of a node that placement reads, beside NodeState (kept apart
// so scans over nodes that never look at ports stay in cache). free.ports
// is the served range minus what tasks hold. A port in use on the node (its
// agent's last report: a listener, a bound socket, a TIME_WAIT) cannot be
// bound by a task, so exact ports come from `open` = free.ports - in_use,
// and ports by count from `spare` = open minus the cooling ports, so a port
// a task just left (its TIME_WAIT not reported yet, a child still holding
// it) is not given to the next task at once. Kept current by RefreshPorts,
// only when something about the node's ports changes.
struct NodePorts {
  PortRanges in_use;  // within capacity.ports
  std::vector<CoolingPorts> cooling;
  PortRanges open;
  PortRanges spare;
};

// Internal per-task record of a running job.
struct PlacedTask {
  int32_t role = 0;
  int32_t index = 0;
  NodeId node = -1;  // -1 once the task finished and released
  Resource allocation;
};

// Internal per-job record.
struct JobState {
  JobRequest request;
  JobPhase phase = JobPhase::kPending;
  int32_t queue = 0;          // index into queue_names()
  int32_t user = 0;           // index into user_names()
  uint64_t seq = 0;           // arrival order, for stable ties
  absl::Time start_time;      // when placed
  absl::Time grace_deadline;  // when preempting
  std::vector<PlacedTask> tasks;
  Resource used;              // sum of live task allocations (scalars)
  Resource preempting_used;   // `used` when it became a victim
  std::string reason;         // last pending reason given
  bool live = false;
};

// Order of pending jobs inside a queue: higher priority, then earlier
// submit time, then arrival.
struct PendingKey {
  int32_t neg_priority = 0;
  int64_t submit_ns = 0;
  uint64_t seq = 0;
  JobSlot job = -1;
  auto operator<=>(const PendingKey&) const = default;
};

class ClusterState {
 public:
  ClusterState() = default;

  // ---- Nodes ----
  // Adds a node with everything free. Errors: empty or duplicate name,
  // topology GPU count != capacity.gpus, a gpu_mask outside the topology,
  // negative sizes.
  absl::Status AddNode(const NodeSpec& spec);
  // Removes a node. Jobs with tasks on it go back to pending (their other
  // tasks released); their ids are appended to *requeued when given.
  absl::Status RemoveNode(std::string_view name, std::vector<std::string>* requeued = nullptr);
  // Marks a node (un)schedulable: running tasks stay, nothing new lands.
  absl::Status SetSchedulable(std::string_view name, bool schedulable);
  // Records the ports in use on a node as its agent reports them (any
  // state: listening, bound, connected, TIME_WAIT); placement skips them.
  // Ports outside the node's range are ignored.
  absl::Status SetPortsInUse(std::string_view name, const PortRanges& in_use);
  // Dates the ports freed since the last call (they cool until now +
  // quarantine) and gives back to count requests those whose time is over.
  // O(nodes with cooling ports).
  void ExpireCoolingPorts(absl::Time now, absl::Duration quarantine);
  // Takes GPUs out of service (busy with processes Trainyard did not start,
  // faulty, cordoned) or back: `excluded` is the set now unusable. A GPU a
  // task holds stays the task's and goes out of service when it is released.
  // Errors: an unknown node.
  absl::Status SetExcludedGpus(std::string_view name, GpuSet excluded);

  // ---- Jobs ----
  // Adds a pending job. Errors: ValidateJob's, a duplicate id.
  absl::Status AddJob(const JobRequest& job);
  // Forgets a job (pending, running or preempting), releasing what it holds.
  absl::Status RemoveJob(std::string_view id);
  // Releases what a running job holds and puts it back to pending with its
  // original submit time (after preemption, or a node failure).
  absl::Status RequeueJob(std::string_view id);
  // Whether a preemption now would end job `id` (JobRequest::last_preemption).
  absl::Status SetLastPreemption(std::string_view id, bool last);
  // Releases one task's allocation; the job stays running (the caller
  // removes it when it ends). Errors: unknown job, role or index.
  absl::Status TaskFinished(std::string_view id, std::string_view role, int32_t index);

  // ---- Reading ----
  int NodeCount() const { return node_count_; }
  // The most GPUs any node added so far has (not lowered by removals).
  int MaxNodeGpus() const { return max_node_gpus_; }
  int JobCount() const { return job_count_; }
  std::optional<NodeId> FindNode(std::string_view name) const;
  std::optional<JobSlot> FindJob(std::string_view id) const;
  const NodeState& node(NodeId n) const { return nodes_[n]; }
  const NodePorts& ports(NodeId n) const { return node_ports_[n]; }
  const JobState& job(JobSlot j) const { return jobs_[j]; }
  const JobBrief& brief(JobSlot j) const { return briefs_[j]; }
  NodeId NodeSlots() const { return static_cast<NodeId>(nodes_.size()); }
  JobSlot JobSlots() const { return static_cast<JobSlot>(jobs_.size()); }
  const GpuTopology& topology(NodeId n) const { return topologies_[nodes_[n].topology]; }
  const Labels& labels(NodeId n) const { return label_sets_[nodes_[n].labels]; }
  // The node's GPU model, "" when unknown.
  const std::string& gpu_model(NodeId n) const;
  // True when a task of `role` may run on node n's GPU model.
  bool ModelAllows(const RoleRequest& role, NodeId n) const;
  // The models `role` may use as a bitmask over the models nodes have
  // (NodeState::gpu_model); 0 = any; bit 63 stands for models no node has.
  uint64_t ModelMask(const RoleRequest& role) const;
  const std::vector<std::string>& racks() const { return racks_; }
  const std::vector<NodeId>& rack_nodes(int32_t rack) const { return rack_nodes_[rack]; }
  const std::vector<std::string>& queue_names() const { return queue_names_; }
  const std::vector<std::string>& user_names() const { return user_names_; }
  // Pending jobs of each queue in PendingKey order.
  const std::set<PendingKey>& pending(int32_t queue) const { return pending_[queue]; }
  // Number of pending jobs over all queues.
  size_t PendingCount() const { return pending_count_; }
  // Current placements of a job, public form.
  std::vector<TaskAssignment> Assignments(JobSlot j) const;
  // Resources held per queue, and per (queue, user); scalars only.
  const Resource& QueueUsed(int32_t queue) const { return queue_used_[queue]; }
  // The part of QueueUsed held by jobs already chosen as victims (it will
  // come back once they are requeued).
  const Resource& QueuePreempting(int32_t queue) const { return queue_preempting_[queue]; }
  // GPU shares (not whole GPUs) held by the queue's placed tasks, in
  // thousandths. Kept apart from QueueUsed: a share is not part of a
  // queue's GPU quota, but the views count it as its fraction.
  int64_t QueueShareMilli(int32_t queue) const { return queue_share_milli_[queue]; }
  Resource UserUsed(int32_t queue, int32_t user) const;
  // Sum of schedulable capacity (scalars) over present nodes.
  const Resource& ClusterCapacity() const { return cluster_capacity_; }
  const NodeIndex& index() const { return index_; }
  // Nodes with a shared GPU that has room, keyed by the largest free share
  // among their shared GPUs (1..999); schedulable nodes only.
  const NodeIndex& share_index() const { return share_index_; }
  // Free GPU share (thousandths) over the schedulable nodes of each GPU
  // model (indexed as NodeState::gpu_model; GPUs out of service count
  // nothing), and over every schedulable node: who else can use a node,
  // for placement (ShapeDistribution::ModelPressure). Kept in O(GPUs) per
  // change of a node.
  const std::vector<int64_t>& ModelFreeShare() const { return model_free_share_; }
  int64_t FreeShareTotal() const { return free_share_total_; }
  // Returns the index of a queue name, adding it when new.
  int32_t InternQueue(std::string_view name);

  // ---- Mechanism (used by the scheduler) ----
  // Gives `allocation` on node n to task (role, index) of job j.
  // REQUIRES: the allocation fits node n's free resources (NotFree is
  // empty); checked, a violation aborts.
  // `allocation` may hold GPUs out of service that no task holds
  // (ReclaimableGpus): a victim's own GPUs put back after a trial, a task
  // adopted after a restart on a GPU excluded since.
  void AllocateTask(JobSlot j, int32_t role, int32_t index, NodeId n, const Resource& allocation);
  // The GPUs of node n out of service (SetExcludedGpus) that no task holds,
  // whole or in shares.
  uint64_t ReclaimableGpus(NodeId n) const;
  // How an allocation is given back: kTentative undoes a trial placement
  // (its ports are free again at once); kEnded frees what a task held, and
  // its ports cool before a count request may get them again.
  enum class Release { kTentative, kEnded };
  // Undoes every task allocation of job j (rollback of a tentative gang or
  // release on requeue); the job keeps its phase.
  void ReleaseAllTasks(JobSlot j, Release how = Release::kTentative);
  // Undoes the trial placement of job j's last-placed task (kTentative)
  // and forgets it. REQUIRES: the job has a task.
  void UndoLastTask(JobSlot j);
  void SetPhase(JobSlot j, JobPhase phase, absl::Time at);
  void SetReservation(NodeId n, JobSlot j);
  void SetReason(JobSlot j, std::string reason) { jobs_[j].reason = std::move(reason); }
  // Approximate bytes held per node and per job (for the benchmark).
  size_t ApproxBytes() const;

 private:
  int32_t InternLabels(const Labels& labels);
  int32_t InternTopology(const GpuTopology& t);
  int32_t InternRack(std::string_view rack);
  int32_t InternGpuModel(std::string_view model);
  void TakeShare(NodeState& node, const Resource& a);
  void GiveShare(NodeState& node, const Resource& a);
  int32_t InternUser(std::string_view user);
  void ReleaseTask(JobSlot j, int32_t pos, Release how);
  void RefreshPorts(NodeId n);
  PendingKey KeyOf(JobSlot j) const;
  void EnterPending(JobSlot j);
  void LeavePending(JobSlot j);
  absl::StatusOr<NodeId> NodeNamed(std::string_view name) const;
  absl::StatusOr<JobSlot> JobNamed(std::string_view id) const;
  void Reindex(NodeId n);
  void CountFreeShare(NodeId n);

  std::vector<NodeState> nodes_;
  std::vector<NodePorts> node_ports_;  // by NodeId, as nodes_
  std::vector<NodeId> free_node_slots_;
  absl::flat_hash_map<std::string, NodeId> node_by_name_;
  int node_count_ = 0;
  int max_node_gpus_ = 0;
  std::vector<JobState> jobs_;
  std::vector<JobBrief> briefs_;
  std::vector<JobSlot> free_job_slots_;
  absl::flat_hash_map<std::string, JobSlot> job_by_id_;
  int job_count_ = 0;
  uint64_t next_seq_ = 0;
  std::vector<Labels> label_sets_;
  std::vector<GpuTopology> topologies_;
  std::vector<std::string> racks_;
  std::vector<std::vector<NodeId>> rack_nodes_;
  std::vector<std::string> queue_names_;
  std::vector<std::string> user_names_;
  std::vector<std::set<PendingKey>> pending_;
  size_t pending_count_ = 0;
  std::vector<Resource> queue_used_;
  std::vector<Resource> queue_preempting_;
  std::vector<int64_t> queue_share_milli_;
  absl::flat_hash_map<uint64_t, Resource> user_used_;  // (queue << 32 | user)
  Resource cluster_capacity_;
  NodeIndex index_;
  NodeIndex share_index_;
  std::vector<std::string> gpu_models_;
  std::vector<int64_t> model_free_share_;  // by gpu model, as gpu_models_
  int64_t free_share_total_ = 0;
  std::vector<NodeId> cooling_nodes_;  // nodes with cooling ports
};

}  // namespace trainyard::core
