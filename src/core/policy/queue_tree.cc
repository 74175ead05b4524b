// QueueTree: absolute shares, usage roll-up and limit checks.
#include "core/policy/queue_tree.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainyard::core {

double DominantShare(const Resource& r, const Resource& cluster) {
  double s = 0;
  if (cluster.memory_mb > 0) s = std::max(s, double(r.memory_mb) / double(cluster.memory_mb));
  if (cluster.vcores_milli > 0) {
    s = std::max(s, double(r.vcores_milli) / double(cluster.vcores_milli));
  }
  if (cluster.gpus > 0) s = std::max(s, double(r.gpus) / double(cluster.gpus));
  return s;
}

QueueTree::QueueTree(const QueuesConfig& config) { Build(config.root, -1, 1.0, 1.0); }

int QueueTree::Build(const QueueConfig& q, int parent, double parent_cap, double parent_max) {
  int t = static_cast<int>(nodes_.size());
  nodes_.push_back(Node{.name = q.name,
                        .parent = parent,
                        .capacity_percent = q.capacity_percent,
                        .max_capacity_percent = q.max_capacity_percent,
                        .user_limit_percent = q.user_limit_percent,
                        .abs_capacity = parent < 0 ? 1.0 : parent_cap * q.capacity_percent / 100,
                        .abs_max = parent < 0 ? 1.0 : parent_max * q.max_capacity_percent / 100,
                        .weight = q.weight,
                        .min_share = q.min_share});
  double cap = nodes_[t].abs_capacity, max = nodes_[t].abs_max;
  for (const QueueConfig& child : q.children) {
    int c = Build(child, t, cap, max);
    nodes_[t].children.push_back(c);
    nodes_[t].leaves.insert(nodes_[t].leaves.end(), nodes_[c].leaves.begin(),
                            nodes_[c].leaves.end());
  }
  if (q.children.empty()) nodes_[t].leaves.push_back(t);
  return t;
}

absl::Status QueueTree::CheckLeaf(std::string_view name) const {
  std::vector<std::string> leaves;
  for (int leaf : nodes_[0].leaves) {
    if (nodes_[leaf].name == name) return absl::OkStatus();
    leaves.push_back(nodes_[leaf].name);
  }
  return absl::InvalidArgumentError(absl::StrCat("queue \"", std::string(name),
                                                 "\" is not a leaf queue; leaf queues are: ",
                                                 absl::StrJoin(leaves, ", ")));
}

void QueueTree::Sync(const ClusterState& state) {
  const std::vector<std::string>& names = state.queue_names();
  queue_of_node_.assign(nodes_.size(), -1);
  node_of_queue_.assign(names.size(), -1);
  for (int leaf : nodes_[0].leaves) {
    for (size_t q = 0; q < names.size(); ++q) {
      if (names[q] == nodes_[leaf].name) {
        node_of_queue_[q] = leaf;
        queue_of_node_[leaf] = static_cast<int32_t>(q);
      }
    }
  }
}

Resource QueueTree::Used(const ClusterState& state, int t) const {
  Resource used;
  for (int leaf : nodes_[t].leaves) {
    int32_t q = leaf < static_cast<int>(queue_of_node_.size()) ? queue_of_node_[leaf] : -1;
    if (q >= 0) used = AddScalars(used, state.QueueUsed(q));
  }
  return used;
}

Resource QueueTree::UsedAfterPreemptions(const ClusterState& state, int t) const {
  Resource used;
  for (int leaf : nodes_[t].leaves) {
    int32_t q = leaf < static_cast<int>(queue_of_node_.size()) ? queue_of_node_[leaf] : -1;
    if (q >= 0) {
      used = AddScalars(used, SubtractScalars(state.QueueUsed(q), state.QueuePreempting(q)));
    }
  }
  return used;
}

bool QueueTree::HasPending(const ClusterState& state, int t) const {
  for (int leaf : nodes_[t].leaves) {
    int32_t q = leaf < static_cast<int>(queue_of_node_.size()) ? queue_of_node_[leaf] : -1;
    if (q >= 0 && !state.pending(q).empty()) return true;
  }
  return false;
}

std::string QueueTree::Admit(const ClusterState& state, const JobState& job,
                             const Resource& demand) const {
  int leaf = NodeOf(job.queue);
  if (leaf < 0) return absl::StrCat("queue ", job.request.queue, " is not configured");
  const Resource& cluster = state.ClusterCapacity();
  constexpr double kEps = 1e-9;
  std::vector<int> path;  // top-down, so the queue that binds is named
  for (int t = leaf; t > 0; t = nodes_[t].parent) path.insert(path.begin(), t);
  for (int t : path) {
    const Node& n = nodes_[t];
    if (DominantShare(AddScalars(Used(state, t), demand), cluster) > n.abs_max + kEps) {
      return absl::StrCat("queue ", n.name, " is at its max-capacity ", n.max_capacity_percent,
                          "%");
    }
  }
  const Node& n = nodes_[leaf];
  Resource user = AddScalars(state.UserUsed(job.queue, job.user), demand);
  if (n.user_limit_percent < 100 &&
      DominantShare(user, cluster) > n.abs_max * n.user_limit_percent / 100 + kEps) {
    return absl::StrCat("user ", job.request.user, " is at the user limit of queue ", n.name,
                        " (", n.user_limit_percent, "% of its max-capacity)");
  }
  return "";
}

}  // namespace trainyard::core
