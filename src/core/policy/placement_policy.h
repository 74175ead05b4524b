// The "pick nodes" side of the scheduler (STYLE.md rule 2): in which order
// the NodeIndex's buckets are visited for a task that needs some GPUs.
// "fragmentation" (default) visits buckets as topology does, then among
// every node that fits keeps the one whose expected fragmentation (for the
// task shapes seen lately; core/policy/fragmentation.h) grows least, a
// multi-GPU task's GPUs taken by topology (fragmentation_placement.cc).
// "topology" is best fit by GPU topology: nodes whose tightest free group
// just fits come first, one switch before one socket before spread, so big
// free groups stay whole. "spread" visits the emptiest nodes first.
// The gang placer and the preemption search call only this.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/resource.h"
#include "core/state/node_index.h"

namespace trainyard::core {

class ClusterState;
struct JobRequest;
struct RoleRequest;
using NodeId = int32_t;

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // "fragmentation", "topology" or "spread".
  virtual std::string_view Name() const = 0;
  // Fills *keys with the keys of index buckets that may serve a task of
  // `gpus` GPUs, best first. REQUIRES: gpus >= 0.
  virtual void CandidateBuckets(const NodeIndex& index, int gpus,
                                std::vector<NodeIndex::Key>* keys) const = 0;

  // Policies that weigh each candidate node (fragmentation) say so here; the
  // gang placer then scores every node that fits, in bucket order, and
  // keeps the one with the lowest cost (ties: the earlier). Nodes whose
  // CostKey was scored already in the same search cost the same and are
  // passed over; a bucket's scan ends after kRepeatRun such nodes in a row
  // once nodes of every GPU model the task may use (with free share) were
  // seen (a bucket of nodes in one state, as a large uniform cluster has,
  // is not walked to its end). Others take the first node that fits.
  static constexpr int kRepeatRun = 16;
  virtual bool ScoresNodes() const { return false; }
  // A hash of everything PlacementCost reads of node n for `role`: two
  // nodes with the same key cost the same. REQUIRES: ScoresNodes().
  virtual uint64_t CostKey(const ClusterState& state, NodeId n, const RoleRequest& role) const {
    (void)state, (void)role;
    return static_cast<uint64_t>(n);
  }
  // The cost of giving `want` (one task of `role`) node n's free resources.
  // REQUIRES: ScoresNodes(), and the task fits node n.
  virtual int64_t PlacementCost(const ClusterState& state, NodeId n, const RoleRequest& role) const {
    (void)state, (void)n, (void)role;
    return 0;
  }
  // Tells the policy the shape of a job that arrived (the fragmentation
  // policy weighs nodes by the shapes it has seen lately).
  virtual void Observe(const ClusterState& state, const JobRequest& job) { (void)state, (void)job; }
};
using PlacementPolicyPtr = std::unique_ptr<PlacementPolicy>;

// The topology policy's bucket order (the fragmentation policy's too).
void TopologyCandidateBuckets(const NodeIndex& index, int gpus, std::vector<NodeIndex::Key>* keys);

// The fragmentation policy (fragmentation_placement.cc).
PlacementPolicyPtr NewFragmentationPlacement();

// The names MakePlacementPolicy knows: "fragmentation", "topology",
// "spread" (the first is the default). Configuration checks read
// them here.
std::vector<std::string> PlacementPolicyNames();

// Returns the policy named "fragmentation", "topology" or "spread" (""
// is the default, fragmentation); an error lists them.
absl::StatusOr<PlacementPolicyPtr> MakePlacementPolicy(std::string_view name);

}  // namespace trainyard::core
