// GangPlacer: places every task of a job at once or none of them — each
// role gets at least its min_available tasks, up to its count — on nodes
// chosen through the NodeIndex in the placement policy's order, keeping a
// job's tasks on as few nodes as it can and in the rack of its first node.
// On success the allocations are committed to the ClusterState; on failure
// the state is as before and the result says which role fell short.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/policy/placement_policy.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

struct PlaceResult {
  bool placed = false;
  // When not placed: the role that fell short and how many of its tasks
  // could be placed before it did.
  int32_t short_role = -1;
  int32_t short_placed = 0;
  // A node was passed over because it is reserved for another job.
  bool blocked_by_reservation = false;
  // Nodes that hold the job's tasks (when placed).
  std::vector<NodeId> nodes;
};

class GangPlacer {
 public:
  // REQUIRES: state and policy outlive the placer. `seed` breaks ties
  // among equal nodes (the scan of a bucket starts at a seeded offset);
  // 0 means "in index order".
  GangPlacer(ClusterState* state, const PlacementPolicy* policy, uint64_t seed = 0)
      : state_(state), policy_(policy), seed_(seed) {}

  // Places job j (pending) all-or-nothing. Does not change the job's phase.
  PlaceResult Place(JobSlot j);

  // Places task `index` of role `role` of job j again (after its node was
  // lost, say) by the same rules as a gang's task: the named node (or,
  // with relax, any), the rack and node selector, nodes reserved for other
  // jobs passed over, then the job's own nodes, the rack of its first
  // node, and the placement policy's bucket order. On success the
  // allocation is committed and result.nodes holds the one node; on
  // failure nothing changes and short_role is `role`.
  // REQUIRES: role and index valid for the job; the task holds nothing.
  PlaceResult PlaceOne(JobSlot j, int32_t role, int32_t index);

  // True when one task of `role` of job j could go on node n now (all
  // constraints and free resources), ignoring reservations when
  // `ignore_reservations`.
  bool FitsOneTask(JobSlot j, const RoleRequest& role, NodeId n, bool ignore_reservations) const;

 private:
  struct RoleContext;
  std::optional<NodeId> FindNode(RoleContext& ctx, int remaining);
  std::optional<NodeId> FindInRack(RoleContext& ctx, int remaining);
  std::optional<NodeId> FindInBuckets(RoleContext& ctx, int tasks);
  // The best node seen so far in a search.
  struct Pick {
    std::optional<NodeId> node;
    int64_t cost = 0;
    int repeats = 0;  // nodes in a row whose cost key was scored already
  };
  // Keeps node n in *pick when it fits and is better; true when the search
  // may stop (the first fit, for a policy that does not score nodes).
  bool Offer(RoleContext& ctx, NodeId n, int tasks, Pick* pick);
  bool GpusFit(NodeId n, const Resource& want) const;
  bool ChooseGpus(NodeId n, const Resource& want, Resource* alloc) const;
  bool NodeOk(RoleContext& ctx, NodeId n, int tasks);
  bool PlaceTask(RoleContext& ctx, NodeId n, int32_t index);
  int TasksFitting(const RoleContext& ctx, NodeId n) const;

  ClusterState* state_;
  const PlacementPolicy* policy_;
  uint64_t seed_;
  // Visits the nodes of one bucket from `start` on, offering each; true
  // when the search may stop.
  bool OfferBucket(RoleContext& ctx, const std::vector<int32_t>& nodes, size_t start, int tasks,
                   Pick* pick);

  std::vector<NodeIndex::Key> keys_;
  absl::flat_hash_set<uint64_t> scored_;  // cost keys scored in this search
  // GPU models (bits over the cluster's model table) with free share that
  // the role may use, and those of the nodes that fit seen in this search:
  // a bucket's scan is cut short only once every wanted model was seen, so
  // a run of one model's nodes never hides another model's.
  uint64_t models_wanted_ = 0;
  uint64_t models_seen_ = 0;
  std::vector<NodeId> job_nodes_;
};

}  // namespace trainyard::core
