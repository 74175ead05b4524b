// The "pick nodes" side of the scheduler (STYLE.md rule 2): in which order
// the NodeIndex's buckets are visited for a task that needs some GPUs.
// "topology" (default) is best fit by GPU topology: nodes whose tightest
// free group just fits come first, one switch before one socket before
// spread, so big free groups stay whole. "spread" visits the emptiest nodes
// first. The gang placer and the preemption search call only this.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/state/node_index.h"

namespace trainyard::core {

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // "topology" or "spread".
  virtual std::string_view Name() const = 0;
  // Fills *keys with the keys of index buckets that may serve a task of
  // `gpus` GPUs, best first. REQUIRES: gpus >= 0.
  virtual void CandidateBuckets(const NodeIndex& index, int gpus,
                                std::vector<NodeIndex::Key>* keys) const = 0;
};
using PlacementPolicyPtr = std::unique_ptr<PlacementPolicy>;

// Returns the policy named "topology" or "spread"; an error lists them.
absl::StatusOr<PlacementPolicyPtr> MakePlacementPolicy(std::string_view name);

}  // namespace trainyard::core
