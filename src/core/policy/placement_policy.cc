// Placement policies: the order in which NodeIndex buckets are visited.
#include "core/policy/placement_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainyard::core {

// First buckets whose tightest switch group holds the request (smallest
// such group first), then socket, then node level.
void TopologyCandidateBuckets(const NodeIndex& index, int gpus, std::vector<NodeIndex::Key>* keys) {
  keys->clear();
  const NodeIndex::Buckets& buckets = index.buckets();
  // Keys sort by (switch_free, socket_free, free): the switch-level
  // buckets are one contiguous ascending run.
  auto first = buckets.lower_bound(NodeIndex::KeyOf(GpuShape{gpus, 0, 0}));
  for (auto it = first; it != buckets.end(); ++it) keys->push_back(it->first);
  for (auto it = buckets.begin(); it != first; ++it) {
    GpuShape s = NodeIndex::ShapeOfKey(it->first);
    if (s.socket_free >= gpus) keys->push_back(it->first);
  }
  size_t socket_end = keys->size();
  for (auto it = buckets.begin(); it != first; ++it) {
    GpuShape s = NodeIndex::ShapeOfKey(it->first);
    if (s.socket_free < gpus && s.free >= gpus) keys->push_back(it->first);
  }
  // Within the socket and node levels, best fit means the smallest group.
  auto by = [](auto field) {
    return [field](NodeIndex::Key a, NodeIndex::Key b) {
      GpuShape x = NodeIndex::ShapeOfKey(a), y = NodeIndex::ShapeOfKey(b);
      return std::make_pair(field(x), a) < std::make_pair(field(y), b);
    };
  };
  size_t switch_end = std::distance(first, buckets.end());
  std::sort(keys->begin() + switch_end, keys->begin() + socket_end,
            by([](const GpuShape& s) { return s.socket_free; }));
  std::sort(keys->begin() + socket_end, keys->end(),
            by([](const GpuShape& s) { return s.free; }));
}

namespace {

// Best fit by topology.
class TopologyPlacement : public PlacementPolicy {
 public:
  std::string_view Name() const override { return "topology"; }
  void CandidateBuckets(const NodeIndex& index, int gpus,
                        std::vector<NodeIndex::Key>* keys) const override {
    TopologyCandidateBuckets(index, gpus, keys);
  }
};

// Spread: the emptiest nodes first.
class SpreadPlacement : public PlacementPolicy {
 public:
  std::string_view Name() const override { return "spread"; }
  void CandidateBuckets(const NodeIndex& index, int gpus,
                        std::vector<NodeIndex::Key>* keys) const override {
    keys->clear();
    for (const auto& [key, nodes] : index.buckets()) {
      if (NodeIndex::ShapeOfKey(key).free >= gpus) keys->push_back(key);
    }
    std::stable_sort(keys->begin(), keys->end(), [](NodeIndex::Key a, NodeIndex::Key b) {
      return NodeIndex::ShapeOfKey(a).free > NodeIndex::ShapeOfKey(b).free;
    });
  }
};

// Every placement policy and how it is made: the one list of names.
struct PlacementPolicyMaker {
  std::string_view name;
  PlacementPolicyPtr (*make)();
};
constexpr PlacementPolicyMaker kPlacementPolicies[] = {
    {"fragmentation", &NewFragmentationPlacement},
    {"topology", []() -> PlacementPolicyPtr { return std::make_unique<TopologyPlacement>(); }},
    {"spread", []() -> PlacementPolicyPtr { return std::make_unique<SpreadPlacement>(); }},
};

}  // namespace

std::vector<std::string> PlacementPolicyNames() {
  std::vector<std::string> names;
  for (const PlacementPolicyMaker& p : kPlacementPolicies) names.emplace_back(p.name);
  return names;
}

absl::StatusOr<PlacementPolicyPtr> MakePlacementPolicy(std::string_view name) {
  if (name.empty()) name = kPlacementPolicies[0].name;
  for (const PlacementPolicyMaker& p : kPlacementPolicies) {
    if (p.name == name) return p.make();
  }
  std::vector<std::string> names = PlacementPolicyNames();
  return absl::InvalidArgumentError(absl::StrCat("placement policy \"", std::string(name), "\" is unknown; use ",
                                                 absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ",
                                                 names.back()));
}

}  // namespace trainyard::core
