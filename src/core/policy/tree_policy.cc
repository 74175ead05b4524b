// Capacity and Fair: one policy over hierarchical queues (queue_tree.h). A
// leaf is served by how far its use (dominant share of the cluster) is from
// what it is owed; a leaf below what it is owed, with work waiting longer
// than the reclaim timeout, takes resources back from leaves above theirs.
// The two differ only in what a leaf is owed:
//  - capacity: its guaranteed capacity; it may borrow idle capacity up to
//    its max-capacity (QueueTree::Admit);
//  - fair (weighted DRF): its weight's part of its parent's share among
//    siblings with work (running or waiting); leaves under their min-share
//    go first and are never victims.
#include <algorithm>
#include <limits>

#include "core/policy/queue_tree.h"

namespace trainyard::core {
namespace {

constexpr double kEps = 1e-9;

enum class Owed { kCapacity, kFairShare };

class TreePolicy : public QueuePolicy {
 public:
  TreePolicy(const QueuesConfig& config, Owed owed)
      : tree_(config), reclaim_timeout_(config.reclaim_timeout), owed_by_(owed) {}

  std::string_view Name() const override { return owed_by_ == Owed::kCapacity ? "capacity" : "fair"; }
  absl::Status CheckQueue(std::string_view queue) const override { return tree_.CheckLeaf(queue); }

  void BeginRound(const ClusterState& state, absl::Time now) override {
    tree_.Sync(state);
    const int n = tree_.size();
    if (owed_by_ == Owed::kFairShare) FairShares(state);
    starved_since_.resize(n, absl::InfiniteFuture());
    for (int t = 0; t < n; ++t) {
      bool starving = tree_.node(t).children.empty() && tree_.HasPending(state, t) &&
                      (BelowMinShare(state, t) || Share(state, t) < OwedTo(t) - kEps);
      if (!starving) {
        starved_since_[t] = absl::InfiniteFuture();
      } else if (starved_since_[t] == absl::InfiniteFuture()) {
        starved_since_[t] = now;
      }
    }
  }

  QueueRank Rank(const ClusterState& state, int32_t queue, const JobState& head) const override {
    int t = tree_.NodeOf(queue);
    QueueRank rank{.order = -static_cast<int64_t>(head.request.priority),
                   .submit_ns = absl::ToUnixNanos(head.request.submit_time),
                   .seq = head.seq};
    if (owed_by_ == Owed::kCapacity) {
      rank.share = t >= 0 && OwedTo(t) > 0 ? Share(state, t) / OwedTo(t) : std::numeric_limits<double>::max();
    } else {
      rank.tier = t >= 0 && BelowMinShare(state, t) ? 0 : 1;
      rank.share = t >= 0 ? Share(state, t) / std::max(OwedTo(t), kEps) : 1e18;
    }
    return rank;
  }

  std::string Admit(const ClusterState& state, const JobState& job) const override {
    return tree_.Admit(state, job, JobDemand(job.request));
  }

  std::string AdmitTask(const ClusterState& state, const JobState& job, const Resource& demand) override {
    tree_.Sync(state);
    return tree_.Admit(state, job, demand);
  }

  bool MayReclaim(const ClusterState&, int32_t queue, absl::Time now) const override {
    int t = tree_.NodeOf(queue);
    if (t < 0 || reclaim_timeout_ <= absl::ZeroDuration()) return false;
    return starved_since_[t] != absl::InfiniteFuture() && now - starved_since_[t] >= reclaim_timeout_;
  }

  bool IsReclaimVictim(const ClusterState& state, int32_t claimant, int32_t victim) const override {
    int t = tree_.NodeOf(victim);
    if (t < 0 || victim == claimant) return false;
    double after = DominantShare(tree_.UsedAfterPreemptions(state, t), state.ClusterCapacity());
    return after > OwedTo(t) + kEps && !BelowMinShare(state, t);
  }

 private:
  // Weighted DRF: the root is owed everything; each child its weight's part
  // of its parent's share among the siblings with work.
  void FairShares(const ClusterState& state) {
    const int n = tree_.size();
    fair_.assign(n, 0);
    std::vector<bool> active(n, false);
    for (int t = 0; t < n; ++t) {
      Resource used = tree_.Used(state, t);
      active[t] = tree_.HasPending(state, t) || used.memory_mb > 0 || used.vcores_milli > 0 || used.gpus > 0;
    }
    fair_[0] = 1;
    for (int t = 0; t < n; ++t) {  // parents precede children
      double total = 0;
      for (int c : tree_.node(t).children) total += active[c] ? tree_.node(c).weight : 0;
      for (int c : tree_.node(t).children) {
        fair_[c] = active[c] && total > 0 ? fair_[t] * tree_.node(c).weight / total : 0;
      }
    }
  }

  // The share of the cluster tree node `t` is owed: its guarantee, or its
  // fair share as of this round (0 before the first).
  double OwedTo(int t) const {
    if (owed_by_ == Owed::kCapacity) return tree_.node(t).abs_capacity;
    return static_cast<size_t>(t) < fair_.size() ? fair_[t] : 0;
  }
  double Share(const ClusterState& state, int t) const {
    return DominantShare(tree_.Used(state, t), state.ClusterCapacity());
  }
  // Fair only: a min-share is not part of what capacity guarantees.
  bool BelowMinShare(const ClusterState& state, int t) const {
    if (owed_by_ != Owed::kFairShare) return false;
    const Resource& min = tree_.node(t).min_share;
    Resource used = tree_.Used(state, t);
    return used.memory_mb < min.memory_mb || used.vcores_milli < min.vcores_milli || used.gpus < min.gpus;
  }

  QueueTree tree_;
  absl::Duration reclaim_timeout_;
  const Owed owed_by_;
  std::vector<double> fair_;  // fair: per tree node, its fair share this round
  std::vector<absl::Time> starved_since_;
};

}  // namespace

QueuePolicyPtr MakeCapacityPolicy(const QueuesConfig& config) {
  return std::make_unique<TreePolicy>(config, Owed::kCapacity);
}

QueuePolicyPtr MakeFairPolicy(const QueuesConfig& config) {
  return std::make_unique<TreePolicy>(config, Owed::kFairShare);
}

}  // namespace trainyard::core
