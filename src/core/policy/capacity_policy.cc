// Capacity: hierarchical queues with a guaranteed capacity and a
// max-capacity each. The queue furthest below its guarantee (used /
// capacity) is served first; a queue may borrow idle capacity up to its
// max-capacity, and a queue below its guarantee with work waiting longer
// than the reclaim timeout takes it back from queues above theirs.
#include <algorithm>
#include <limits>

#include "core/policy/queue_tree.h"

namespace trainyard::core {
namespace {

constexpr double kEps = 1e-9;

class CapacityPolicy : public QueuePolicy {
 public:
  explicit CapacityPolicy(const QueuesConfig& config)
      : tree_(config), reclaim_timeout_(config.reclaim_timeout) {}

  std::string_view Name() const override { return "capacity"; }
  absl::Status CheckQueue(std::string_view queue) const override {
    return tree_.CheckLeaf(queue);
  }

  void BeginRound(const ClusterState& state, absl::Time now) override {
    tree_.Sync(state);
    starved_since_.resize(tree_.size(), absl::InfiniteFuture());
    for (int t = 0; t < tree_.size(); ++t) {
      bool starving = tree_.node(t).children.empty() && tree_.HasPending(state, t) &&
                      UsedShare(state, t) < tree_.node(t).abs_capacity - kEps;
      if (!starving) {
        starved_since_[t] = absl::InfiniteFuture();
      } else if (starved_since_[t] == absl::InfiniteFuture()) {
        starved_since_[t] = now;
      }
    }
  }

  QueueRank Rank(const ClusterState& state, int32_t queue, const JobState& head) const override {
    int t = tree_.NodeOf(queue);
    double ratio = std::numeric_limits<double>::max();
    if (t >= 0 && tree_.node(t).abs_capacity > 0) {
      ratio = UsedShare(state, t) / tree_.node(t).abs_capacity;
    }
    return QueueRank{.share = ratio,
                     .order = -static_cast<int64_t>(head.request.priority),
                     .submit_ns = absl::ToUnixNanos(head.request.submit_time),
                     .seq = head.seq};
  }

  std::string Admit(const ClusterState& state, const JobState& job) const override {
    return tree_.Admit(state, job, JobDemand(job.request));
  }

  std::string AdmitTask(const ClusterState& state, const JobState& job,
                        const Resource& demand) override {
    tree_.Sync(state);
    return tree_.Admit(state, job, demand);
  }

  bool MayReclaim(const ClusterState&, int32_t queue, absl::Time now) const override {
    int t = tree_.NodeOf(queue);
    if (t < 0 || reclaim_timeout_ <= absl::ZeroDuration()) return false;
    return starved_since_[t] != absl::InfiniteFuture() &&
           now - starved_since_[t] >= reclaim_timeout_;
  }

  bool IsReclaimVictim(const ClusterState& state, int32_t claimant,
                       int32_t victim) const override {
    int t = tree_.NodeOf(victim);
    if (t < 0 || victim == claimant) return false;
    double after = DominantShare(tree_.UsedAfterPreemptions(state, t), state.ClusterCapacity());
    return after > tree_.node(t).abs_capacity + kEps;
  }

 private:
  double UsedShare(const ClusterState& state, int t) const {
    return DominantShare(tree_.Used(state, t), state.ClusterCapacity());
  }

  QueueTree tree_;
  absl::Duration reclaim_timeout_;
  std::vector<absl::Time> starved_since_;
};

}  // namespace

QueuePolicyPtr MakeCapacityPolicy(const QueuesConfig& config) {
  return std::make_unique<CapacityPolicy>(config);
}

}  // namespace trainyard::core
