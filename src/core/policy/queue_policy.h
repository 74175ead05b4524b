// The "order demand" side of the scheduler (STYLE.md rule 2): which queue's
// next pending job is tried next, whether queue limits let it start, and
// which queues may take resources back from which. FIFO, Capacity and
// Fair-DRF implement this interface; the scheduling mechanism calls only
// these methods and never asks which policy it holds.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/policy/queue_config.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

// Rank of a queue for its next job; the lowest rank is served first.
struct QueueRank {
  int64_t tier = 0;    // e.g. 0 = below min-share, 1 = otherwise
  double share = 0;    // e.g. weighted dominant share, used/guaranteed
  int64_t order = 0;   // e.g. -priority
  int64_t submit_ns = 0;
  uint64_t seq = 0;
  auto operator<=>(const QueueRank&) const = default;
};

class QueuePolicy {
 public:
  virtual ~QueuePolicy() = default;
  // "fifo", "capacity" or "fair".
  virtual std::string_view Name() const = 0;
  // OK when jobs may name leaf queue `queue`; the error lists the leaves.
  virtual absl::Status CheckQueue(std::string_view queue) const = 0;
  // Called once at the start of each scheduling round.
  virtual void BeginRound(const ClusterState& state, absl::Time now) = 0;
  // Rank of leaf queue `queue` whose next pending job is `head`. Called
  // again after every attempt, so usage changes are seen at once.
  virtual QueueRank Rank(const ClusterState& state, int32_t queue, const JobState& head) const = 0;
  // "" when `job` may start now under its queue's limits; otherwise a
  // reason a person can act on ("queue research is at its max-capacity
  // 40%").
  virtual std::string Admit(const ClusterState& state, const JobState& job) const = 0;
  // The same check for one more task of placed `job` that needs `demand`
  // (scalars), e.g. a task placed again after its node was lost. It maps
  // the state's queues afresh, so it may be called between rounds (after a
  // restart, before any round).
  virtual std::string AdmitTask(const ClusterState& state, const JobState& job,
                                const Resource& demand) = 0;
  // True when leaf `queue` has been owed resources (below its guarantee or
  // fair share, with demand waiting) for longer than the reclaim timeout.
  virtual bool MayReclaim(const ClusterState& state, int32_t queue, absl::Time now) const = 0;
  // True when running jobs of `victim_queue` may be preempted to give
  // resources back to `claimant_queue` (the victim is above its share).
  virtual bool IsReclaimVictim(const ClusterState& state, int32_t claimant_queue,
                               int32_t victim_queue) const = 0;
};
using QueuePolicyPtr = std::unique_ptr<QueuePolicy>;

// The names MakeQueuePolicy knows: "fifo", "capacity", "fair" (the first is
// the default). Configuration checks read them here.
std::vector<std::string> QueuePolicyNames();

// Returns the policy named "fifo", "capacity" or "fair" over `config`
// (validated here; FIFO ignores it). An error names an unknown policy and
// lists the known ones, or relays ValidateQueues's error.
absl::StatusOr<QueuePolicyPtr> MakeQueuePolicy(std::string_view name, const QueuesConfig& config);

}  // namespace trainyard::core
