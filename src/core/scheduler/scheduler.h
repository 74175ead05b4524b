// Scheduler: the entry point of the scheduler core. It owns a ClusterState
// that callers (the server, the simulator) keep current with incremental
// updates, and on each Schedule(now) returns Decisions: gang placements
// (already committed to the state), preemptions with a grace deadline, and a
// pending reason for every job left waiting. It is the only writer of the
// state: one task placed again, or adopted after a restart, goes through it
// too. Pure: time comes in as `now`,
// tie-breaks are seeded, same calls in the same order give the same result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/policy/placement_policy.h"
#include "core/policy/preemption.h"
#include "core/policy/queue_config.h"
#include "core/policy/queue_policy.h"
#include "core/resources/limits.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

struct SchedulerOptions {
  std::string queue_policy = "fifo";   // "fifo", "capacity", "fair"
  std::string placement = "fragmentation";  // "fragmentation", "topology", "spread"
  QueuesConfig queues = DefaultQueues();
  // A head-of-line job waiting longer than this gets a reservation: nodes
  // held for it as they drain; others backfill only elsewhere.
  absl::Duration reservation_wait = absl::Minutes(5);
  // Time a preemption victim gets to checkpoint before it is killed.
  absl::Duration preemption_grace = absl::Seconds(30);
  // A running job is not chosen as a victim (by priority or by queue
  // reclaim) until its current run is this old, so that a job just started
  // is not thrown out again before it did any work (thrashing). 0 = off.
  absl::Duration preemption_min_runtime = absl::ZeroDuration();
  bool enable_preemption = true;
  // How long ports a task left are kept from requests by count (a request
  // for exact ports may take them once nothing on the node holds them).
  // Counted from the first Schedule(now) after the release; 0 = no wait.
  absl::Duration port_quarantine = absl::Seconds(60);
  // Victim and reservation searches per round (each looks at every node).
  int max_preemption_searches = 4;
  // Seeds tie-breaks among equal nodes; 0 = plain index order.
  uint64_t seed = 1;
  AllocationLimits limits;
};

// A job placed this round: every placed task with its node, GPUs and ports.
struct JobPlacement {
  std::string job_id;
  std::vector<TaskAssignment> tasks;
};

// A running job chosen as a victim. It keeps its resources until the
// caller calls RequeueJob (after it exits, or at grace_deadline).
struct Preemption {
  std::string victim_job_id;
  std::string for_job_id;
  std::string reason;  // "preempted by production job prod-1 (priority)"
  absl::Time grace_deadline;
  std::vector<TaskAssignment> tasks;  // what the victim holds now
};

struct PendingReason {
  std::string job_id;
  std::string reason;
};

struct Decisions {
  std::vector<JobPlacement> placements;
  std::vector<Preemption> preemptions;
  std::vector<PendingReason> pending;  // one per job still waiting
};

class Scheduler {
 public:
  // Builds a scheduler. Errors: unknown policy names, invalid queues.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options);

  // Incremental updates, O(what changed); errors as ClusterState's.
  absl::Status AddNode(const NodeSpec& spec) { return state_.AddNode(spec); }
  absl::Status RemoveNode(std::string_view name, std::vector<std::string>* requeued = nullptr) {
    return state_.RemoveNode(name, requeued);
  }
  absl::Status SetSchedulable(std::string_view name, bool on) {
    return state_.SetSchedulable(name, on);
  }
  // GPUs of a node taken out of service (busy with unknown processes).
  absl::Status SetExcludedGpus(std::string_view name, GpuSet excluded) {
    return state_.SetExcludedGpus(name, excluded);
  }
  // The ports in use on a node as its agent last reported them; no task is
  // given one of them. Errors: an unknown node.
  absl::Status SetPortsInUse(std::string_view name, const PortRanges& in_use) {
    return state_.SetPortsInUse(name, in_use);
  }
  // Adds a pending job. Errors: ValidateJob's, requests outside
  // options.limits, a queue the policy does not know, a duplicate id.
  absl::Status AddJob(const JobRequest& job);
  // A job ended or was killed: forget it and free what it holds.
  absl::Status RemoveJob(std::string_view id);
  // A preempted (or failed) job goes back to pending, freeing what it holds.
  absl::Status RequeueJob(std::string_view id);
  // Whether a preemption now would end the job (JobRequest::last_preemption).
  absl::Status SetLastPreemption(std::string_view id, bool last) { return state_.SetLastPreemption(id, last); }
  // One task released its allocation (it ended, or its node was lost); the
  // job stays placed. Errors: unknown job, or no such task holding anything.
  absl::Status TaskFinished(std::string_view id, std::string_view role, int32_t index) {
    return state_.TaskFinished(id, role, index);
  }

  // ---- One task of a placed job (scheduler_tasks.cc) ----
  // Places task (role, index) of placed job `job_id` again, e.g. after its
  // node was lost and the caller called TaskFinished for it, through the
  // machinery of a gang placement: the queue policy's admission for this
  // task's demand (max-capacity of every queue on its path, the user
  // limit), then GangPlacer::PlaceOne (nodeName / relax, rack, node
  // selector, nodes reserved for other jobs passed over, the job's own
  // nodes first, the placement policy's order). Returns the committed
  // assignment. Errors: NotFound for an unknown job, role or index;
  // FailedPrecondition when the job is pending or being preempted, or the
  // task still holds an allocation; ResourceExhausted with the reason
  // ("job j task worker-1: queue research is at its max-capacity 40%").
  absl::StatusOr<TaskAssignment> PlaceTask(std::string_view job_id, std::string_view role,
                                           int32_t index);
  // How many of `tasks` (role, index) of placed job `job_id`, none of which
  // holds anything, PlaceTask would place one after another, in order,
  // stopping at the first it refuses (its error in `*why`). A trial: what
  // the tasks would hold is given back, nothing is committed, no port cools.
  // 0, with the queue policy's reason, when the policy would not admit the
  // job's whole count on top of what it holds now (placed again after a
  // resize, it is admitted on its whole count). An elastic job asks it
  // before it grows (docs/elastic.md).
  int RoomForTasks(std::string_view job_id, const std::vector<std::pair<std::string, int32_t>>& tasks,
                   absl::Status* why);
  // Takes task (role, index) of placed job `job_id`, which runs (recovered
  // after a restart, or its node re-registered), back into the state on
  // node `node_name` with exactly `allocation` (memory, vcores, gpus ==
  // popcount(gpu_mask), exact ports). No admission or constraint check: the
  // task runs there. The job may also be being preempted (a victim holds
  // what it holds until RequeueJob). Errors: PlaceTask's NotFound and
  // FailedPrecondition (but for a preempting job); NotFound for an unknown
  // node; InvalidArgument for a malformed allocation; FailedPrecondition
  // when any part of it is not free on the node (never double-allocates).
  absl::Status AdoptTask(std::string_view job_id, std::string_view role, int32_t index,
                         std::string_view node_name, const Resource& allocation);
  // A recovered job that was placed before a restart is placed (running)
  // since `start`: it leaves the pending queue holding nothing; its tasks
  // come back with AdoptTask as their nodes return, or PlaceTask.
  // Errors: NotFound for an unknown job; FailedPrecondition unless pending.
  absl::Status MarkRunning(std::string_view job_id, absl::Time start);

  // One scheduling round at time `now`.
  Decisions Schedule(absl::Time now);

  // The state, read-only: only the scheduler writes it (through the calls
  // above), so every allocation goes through its policies.
  const ClusterState& state() const { return state_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  Scheduler(SchedulerOptions options, QueuePolicyPtr queues, PlacementPolicyPtr placement);
  struct Round;
  void RunQueues(Round& round);
  void TryJob(Round& round, JobSlot j);
  void Commit(Round& round, JobSlot j);
  bool WaitingForVictims(JobSlot j);
  bool TryPreempt(Round& round, JobSlot j, std::string* later);
  std::optional<VictimChoice> FindVictims(Round& round, JobSlot j, bool ripe_only,
                                          std::string* why);
  std::string WhenVictimsRipen(Round& round, JobSlot j);
  void Reserve(Round& round, JobSlot j);
  void SetReservation(const std::string& job_id, JobSlot j, const std::vector<NodeId>& nodes);
  void ClearReservation(const std::string& job_id);
  void DropStaleReservations();
  void ReportPending(Round& round);
  std::string ReservationReason(const std::string& job_id) const;
  struct TaskRef;
  enum class Purpose { kPlace, kAdopt };
  // The task (role, index) of a job that may take an allocation for
  // `purpose`, or PlaceTask's / AdoptTask's lookup errors.
  absl::StatusOr<TaskRef> FreeTask(std::string_view job_id, std::string_view role, int32_t index,
                                   Purpose purpose) const;

  SchedulerOptions options_;
  QueuePolicyPtr queue_policy_;
  PlacementPolicyPtr placement_;
  ClusterState state_;
  // Reserved nodes per job id (preemptors and the one starving job).
  absl::flat_hash_map<std::string, std::pair<JobSlot, std::vector<NodeId>>> reservations_;
  std::string starving_job_;  // holder of the anti-starvation reservation
  // Victims each preemptor waits for.
  absl::flat_hash_map<std::string, std::vector<std::string>> awaiting_;
};

}  // namespace trainyard::core
