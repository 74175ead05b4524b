// QueueTree: the configured queue hierarchy resolved to absolute shares
// (capacity and max-capacity as fractions of the cluster, fair-share
// weights), mapped onto the ClusterState's queue indices, with the limit
// checks both the Capacity and the Fair policy apply (max-capacity up the
// tree, per-user limit). Internal to policy/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/policy/queue_config.h"
#include "core/policy/queue_policy.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

// Dominant share of r in `cluster` over memory, vcores and GPUs; 0 when the
// cluster is empty.
double DominantShare(const Resource& r, const Resource& cluster);

class QueueTree {
 public:
  struct Node {
    std::string name;
    int parent = -1;
    std::vector<int> children;
    std::vector<int> leaves;  // leaf nodes under (itself when a leaf)
    double capacity_percent = 0, max_capacity_percent = 100, user_limit_percent = 100;
    double abs_capacity = 0, abs_max = 1;  // fractions of the cluster
    double weight = 1;
    Resource min_share;
  };

  explicit QueueTree(const QueuesConfig& config);

  // OK when `name` is a leaf; the error lists the leaves.
  absl::Status CheckLeaf(std::string_view name) const;
  // Maps state queue indices to tree nodes; call at the start of a round.
  void Sync(const ClusterState& state);
  // Tree node of state queue q, or -1 when q is not a configured leaf.
  int NodeOf(int32_t state_queue) const {
    return state_queue < static_cast<int32_t>(node_of_queue_.size()) ? node_of_queue_[state_queue]
                                                                    : -1;
  }
  // Resources used under tree node t, now.
  Resource Used(const ClusterState& state, int t) const;
  // Used minus what victims already chosen will give back.
  Resource UsedAfterPreemptions(const ClusterState& state, int t) const;
  // True when some leaf under t has pending jobs.
  bool HasPending(const ClusterState& state, int t) const;
  // "" or why `demand` (scalars) more for `job` may not start under the
  // max-capacity of each queue on its path or its queue's user limit.
  std::string Admit(const ClusterState& state, const JobState& job, const Resource& demand) const;
  const Node& node(int t) const { return nodes_[t]; }
  int size() const { return static_cast<int>(nodes_.size()); }

 private:
  int Build(const QueueConfig& q, int parent, double parent_cap, double parent_max);

  std::vector<Node> nodes_;
  std::vector<int> node_of_queue_;   // state queue -> tree node
  std::vector<int32_t> queue_of_node_;  // tree node -> state queue (-1)
};

// The three policies (queue_policy.cc picks one by name): FIFO
// (fifo_policy.cc), and capacity and fair, one tree policy (tree_policy.cc).
QueuePolicyPtr MakeFifoPolicy();
QueuePolicyPtr MakeCapacityPolicy(const QueuesConfig& config);
QueuePolicyPtr MakeFairPolicy(const QueuesConfig& config);

}  // namespace trainyard::core
