// Fair: weighted DRF. Each leaf's fair share is its weight's part of its
// parent's share among siblings with work (running or waiting); queues
// under their min-share go first, then the lowest dominant share / fair
// share. A queue below its fair share (or min-share) with work waiting
// longer than the reclaim timeout may preempt from queues above theirs.
#include <algorithm>

#include "core/policy/queue_tree.h"

namespace trainyard::core {
namespace {

constexpr double kEps = 1e-9;

class FairPolicy : public QueuePolicy {
 public:
  explicit FairPolicy(const QueuesConfig& config)
      : tree_(config), reclaim_timeout_(config.reclaim_timeout) {}

  std::string_view Name() const override { return "fair"; }
  absl::Status CheckQueue(std::string_view queue) const override {
    return tree_.CheckLeaf(queue);
  }

  void BeginRound(const ClusterState& state, absl::Time now) override {
    tree_.Sync(state);
    int n = tree_.size();
    active_.assign(n, false);
    fair_.assign(n, 0);
    for (int t = 0; t < n; ++t) {
      Resource used = tree_.Used(state, t);
      active_[t] = tree_.HasPending(state, t) || used.memory_mb > 0 || used.vcores_milli > 0 ||
                   used.gpus > 0;
    }
    fair_[0] = 1;
    for (int t = 0; t < n; ++t) {  // parents precede children
      double total = 0;
      for (int c : tree_.node(t).children) total += active_[c] ? tree_.node(c).weight : 0;
      for (int c : tree_.node(t).children) {
        fair_[c] = active_[c] && total > 0 ? fair_[t] * tree_.node(c).weight / total : 0;
      }
    }
    starved_since_.resize(n, absl::InfiniteFuture());
    for (int t = 0; t < n; ++t) {
      bool starving = tree_.node(t).children.empty() && tree_.HasPending(state, t) &&
                      (BelowMinShare(state, t) || Share(state, t) < fair_[t] - kEps);
      if (!starving) {
        starved_since_[t] = absl::InfiniteFuture();
      } else if (starved_since_[t] == absl::InfiniteFuture()) {
        starved_since_[t] = now;
      }
    }
  }

  QueueRank Rank(const ClusterState& state, int32_t queue, const JobState& head) const override {
    int t = tree_.NodeOf(queue);
    QueueRank rank{.tier = 1,
                   .share = 1e18,
                   .order = -static_cast<int64_t>(head.request.priority),
                   .submit_ns = absl::ToUnixNanos(head.request.submit_time),
                   .seq = head.seq};
    if (t < 0) return rank;
    rank.tier = BelowMinShare(state, t) ? 0 : 1;
    rank.share = Share(state, t) / std::max(fair_[t], kEps);
    return rank;
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
    return after > fair_[t] + kEps && !BelowMinShare(state, t);
  }

 private:
  double Share(const ClusterState& state, int t) const {
    return DominantShare(tree_.Used(state, t), state.ClusterCapacity());
  }
  bool BelowMinShare(const ClusterState& state, int t) const {
    const Resource& min = tree_.node(t).min_share;
    Resource used = tree_.Used(state, t);
    return used.memory_mb < min.memory_mb || used.vcores_milli < min.vcores_milli ||
           used.gpus < min.gpus;
  }

  QueueTree tree_;
  absl::Duration reclaim_timeout_;
  std::vector<bool> active_;
  std::vector<double> fair_;
  std::vector<absl::Time> starved_since_;
};

}  // namespace

QueuePolicyPtr MakeFairPolicy(const QueuesConfig& config) {
  return std::make_unique<FairPolicy>(config);
}

}  // namespace trainyard::core
