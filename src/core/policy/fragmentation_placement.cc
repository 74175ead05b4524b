// The "fragmentation" placement policy (the default): the topology policy's
// bucket order, then, among every node that fits, the one whose expected
// fragmentation (Trainyard's refinement of FGD's measure,
// ReachFragmentationSum) grows least for the task shapes seen lately, plus
// the price of taking GPU share that only this node's model can give to
// the constrained shapes seen lately (ModelPressure, ScarcityCost).
// The shapes come from a window of recent arrivals, so the weights follow
// the workload as it changes. Combined with topology for multi-GPU tasks:
// the GPUs taken on a node are its tightest free group (FitGpus, as the
// topology policy takes them), and among nodes whose fragmentation cost is
// equal the one where that group is tighter (one switch, then one socket)
// wins.
#include <algorithm>
#include <deque>

#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "core/policy/fragmentation.h"
#include "core/policy/gpu_fit.h"
#include "core/policy/placement_policy.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {
namespace {

// Tasks whose shapes weigh fragmentation: enough that a rare shape (a
// model-constrained one, say) still counts, few enough to follow change.
constexpr int64_t kWindowTasks = 4096;

FragNode FragOf(const ClusterState& state, NodeId n) {
  const NodeState& node = state.node(n);
  FragNode f;
  f.cpu_free_milli = node.free.vcores_milli;
  f.model = node.gpu_model;
  f.gpu_count = node.capacity.gpus;
  for (int g = 0; g < f.gpu_count; ++g) {
    f.free[g] = static_cast<int16_t>((node.excluded >> g) & 1 ? 0 : node.FreeShare(g));
  }
  return f;
}

TaskShape TaskShapeOf(const ClusterState& state, const RoleRequest& role) {
  TaskShape t{.cpu_milli = role.resource.vcores_milli};
  if (role.resource.IsGpuShare()) {
    t.gpu_milli = role.resource.gpu_milli;
  } else {
    t.gpus = role.resource.gpu_mask != 0 ? GpuSet(role.resource.gpu_mask).Count() : role.resource.gpus;
  }
  t.models = state.ModelMask(role);
  return t;
}

// Tightness ranks (switch, socket, node) below one unit of fragmentation
// cost: the rank breaks ties only.
constexpr int64_t kTightnessLevels = 3;

// 0 when a multi-GPU task's GPUs would share one PCIe switch on node n, 1
// one socket, 2 spread (or a task of fewer than two whole GPUs).
int64_t TightnessRank(const ClusterState& state, NodeId n, const RoleRequest& role,
                      const TaskShape& t) {
  if (t.gpus < 2) return 0;
  GpuFit fit;
  if (!FitGpus(state.topology(n), GpuSet(state.node(n).free.gpu_mask), t.gpus,
               role.resource.gpu_mask, Tightness::kNode, &fit)) {
    return kTightnessLevels - 1;
  }
  return std::clamp<int64_t>(static_cast<int>(fit.tightness) - 1, 0, kTightnessLevels - 1);
}

class FragmentationPlacement : public PlacementPolicy {
 public:
  std::string_view Name() const override { return "fragmentation"; }
  void CandidateBuckets(const NodeIndex& index, int gpus,
                        std::vector<NodeIndex::Key>* keys) const override {
    TopologyCandidateBuckets(index, gpus, keys);
  }
  bool ScoresNodes() const override { return true; }

  int64_t PlacementCost(const ClusterState& state, NodeId n, const RoleRequest& role) const override {
    FragNode before = FragOf(state, n);
    TaskShape t = TaskShapeOf(state, role);
    GpuPick pick;
    if (t.gpu_milli > 0) {
      // The GPU the placer will take (FitShare), so the cost is of the
      // placement that happens.
      int g = FitShare(state.topology(n), state.node(n), t.gpu_milli, role.resource.gpu_memory_mb);
      if (g >= 0) pick = GpuPick{.gpus = GpuSet(uint64_t{1} << g), .milli = t.gpu_milli};
    } else if (t.gpus > 0) {
      std::vector<GpuPick> picks;
      GpuPicks(before, t, &picks);
      if (!picks.empty()) pick = picks.front();
    }
    int64_t cost = shapes_.ReachFragmentationSum(AfterPick(before, t, pick)) -
                   shapes_.ReachFragmentationSum(before);
    if (shapes_.HasConstrainedDemand() && t.GpuDemand() > 0) {
      int32_t pressure =
          shapes_.PressureOn(before.model, state.ModelFreeShare(), state.FreeShareTotal());
      cost += shapes_.ScarcityCost(t.GpuDemand(), pressure, state.MaxNodeGpus());
    }
    return cost * kTightnessLevels + TightnessRank(state, n, role, t);
  }

  uint64_t CostKey(const ClusterState& state, NodeId n, const RoleRequest& role) const override {
    const NodeState& node = state.node(n);
    FragNode f = FragOf(state, n);
    uint64_t key = absl::HashOf(f.cpu_free_milli, f.model, f.gpu_count,
                                absl::MakeConstSpan(f.free.data(), f.gpu_count));
    if (role.resource.IsGpuShare() && role.resource.gpu_memory_mb > 0) {
      key = absl::HashOf(key, node.gpu_memory_mb, node.share_memory_used);
    }
    // Where the tightest group lies depends on the topology.
    if (role.resource.gpus > 1) key = absl::HashOf(key, node.topology, node.free.gpu_mask);
    return key;
  }

  void Observe(const ClusterState& state, const JobRequest& job) override {
    for (const RoleRequest& role : job.roles) {
      TaskShape t = TaskShapeOf(state, role);
      shapes_.Add(t, role.count);
      window_.push_back({t, role.count});
      in_window_ += role.count;
    }
    while (in_window_ > kWindowTasks && window_.size() > 1) {
      shapes_.Add(window_.front().first, -window_.front().second);
      in_window_ -= window_.front().second;
      window_.pop_front();
    }
  }

 private:
  ShapeDistribution shapes_;
  std::deque<std::pair<TaskShape, int64_t>> window_;
  int64_t in_window_ = 0;
};

}  // namespace

PlacementPolicyPtr NewFragmentationPlacement() { return std::make_unique<FragmentationPlacement>(); }

}  // namespace trainyard::core
