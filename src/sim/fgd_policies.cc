// The FGD protocol's placement policies; see fgd_policies.h.
#include "sim/fgd_policies.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/policy/gpu_fit.h"

namespace trainyard::sim {
namespace {

using core::FragNode;
using core::GpuPick;
using core::GpuSet;
using core::TaskShape;

bool IsCpuOnly(const TaskShape& t) { return t.gpus == 0 && t.gpu_milli == 0; }

// The lowest-index GPUs that fit (first fit within a node).
GpuPick LowestPick(const FragNode& node, const TaskShape& t) {
  GpuPick pick{.milli = t.gpus > 0 ? 1000 : t.gpu_milli};
  if (IsCpuOnly(t)) return GpuPick{};
  for (int g = 0; g < node.gpu_count; ++g) {
    if (node.free[g] < pick.milli) continue;
    pick.gpus = pick.gpus | GpuSet(uint64_t{1} << g);
    if (t.gpus == 0 || pick.gpus.Count() == t.gpus) break;
  }
  return pick;
}

// The GPU whose free share fits tightest (ties: lowest index); whole GPUs
// as LowestPick.
GpuPick TightestPick(const FragNode& node, const TaskShape& t) {
  if (t.gpus > 0 || IsCpuOnly(t)) return LowestPick(node, t);
  int best = -1;
  for (int g = 0; g < node.gpu_count; ++g) {
    if (node.free[g] >= t.gpu_milli && (best < 0 || node.free[g] < node.free[best])) best = g;
  }
  return GpuPick{.gpus = GpuSet(uint64_t{1} << best), .milli = t.gpu_milli};
}

int64_t GpuFree(const FragNode& n) {
  int64_t sum = 0;
  for (int g = 0; g < n.gpu_count; ++g) sum += n.free[g];
  return sum;
}

class FirstFit : public ProtoPolicy {
 public:
  bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& t, ProtoChoice* out) override {
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (!TaskFits(nodes[n], t)) continue;
      *out = ProtoChoice{static_cast<int32_t>(n), LowestPick(nodes[n].frag, t.shape)};
      return true;
    }
    return false;
  }
};

// The artifact's best fit: the least leftover by 0.5 cpu/128 cores + 0.5
// GPU share/8 GPUs after the placement.
class BestFit : public ProtoPolicy {
 public:
  bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& t, ProtoChoice* out) override {
    double best = std::numeric_limits<double>::infinity();
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (!TaskFits(nodes[n], t)) continue;
      const FragNode& f = nodes[n].frag;
      double cpu_left = static_cast<double>(f.cpu_free_milli - t.shape.cpu_milli);
      double gpu_left = static_cast<double>(GpuFree(f) - t.shape.GpuDemand());
      double score = 0.5 * cpu_left / 128000.0 + 0.5 * gpu_left / 8000.0;
      if (score < best) {
        best = score;
        *out = ProtoChoice{static_cast<int32_t>(n), TightestPick(f, t.shape)};
      }
    }
    return best < std::numeric_limits<double>::infinity();
  }
};

class RandomFit : public ProtoPolicy {
 public:
  explicit RandomFit(uint64_t seed) : rng_(seed) {}
  bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& t, ProtoChoice* out) override {
    fits_.clear();
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (TaskFits(nodes[n], t)) fits_.push_back(static_cast<int32_t>(n));
    }
    if (fits_.empty()) return false;
    int32_t n = fits_[rng_() % fits_.size()];
    *out = ProtoChoice{n, LowestPick(nodes[n].frag, t.shape)};
    return true;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<int32_t> fits_;
};

struct FragmentationOptions {
  // The published FGD code's score: an integer, 100 x the logistic of the
  // drop in the node's expected fragmentation in GPUs, rounded down
  // (FgdIntegerScore); nodes of equal score tie, and a tie is broken at
  // random (seeded), as the Kubernetes scheduler framework breaks it.
  bool integer_score = false;
};

// Least growth of expected fragmentation (core/policy/fragmentation.h), the
// shapes weighed by the whole workload given up front (the FGD artifact's
// "typical pods"). A node's best placement for a task shape changes only
// when the node does, so it is kept per (shape, node) and recomputed only
// then: a run costs a pass over the cluster per shape and per change, not
// per task.
class FragmentationFit : public ProtoPolicy {
 public:
  FragmentationFit(FragmentationOptions o, const std::vector<ProtoTask>& workload, uint64_t seed)
      : integer_(o.integer_score), rng_(seed) {
    for (const ProtoTask& t : workload) dist_.Add(t.shape);
  }

  void Changed(int32_t n) override {
    if (static_cast<size_t>(n) < version_.size()) ++version_[n];
  }

  bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& t, ProtoChoice* out) override {
    if (version_.size() != nodes.size()) version_.assign(nodes.size(), 0);
    std::vector<Entry>& cache = CacheFor(t, nodes.size());
    int64_t best_score = 0;
    const Entry* best = nullptr;
    int32_t best_node = -1;
    int64_t ties = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      Entry& e = cache[n];
      if (e.version != version_[n]) Evaluate(nodes[n], t, &e, n);
      if (!e.fits) continue;
      int64_t s = e.score;
      bool take = best == nullptr || s < best_score;
      if (take) {
        ties = 1;
      } else if (integer_ && s == best_score) {
        // Reservoir sampling: each of k equal nodes is kept with chance 1/k.
        take = Below(++ties) == 0;
      }
      if (take) {
        best = &e;
        best_score = s;
        best_node = static_cast<int32_t>(n);
      }
    }
    if (best == nullptr) return false;
    *out = ProtoChoice{best_node, best->pick};
    return true;
  }

 private:
  struct Entry {
    uint32_t version = ~0u;
    bool fits = false;
    int64_t score = 0;  // the growth of fragmentation (FGD), or -FgdIntegerScore
    GpuPick pick;
  };

  std::vector<Entry>& CacheFor(const ProtoTask& t, size_t nodes) {
    auto key = std::make_tuple(t.shape.cpu_milli, t.shape.gpus, t.shape.gpu_milli, t.shape.models,
                               t.memory_mib);
    auto [it, fresh] = shape_ids_.try_emplace(key, static_cast<int32_t>(caches_.size()));
    if (fresh) caches_.emplace_back(nodes);
    return caches_[it->second];
  }

  void Evaluate(const ProtoNode& node, const ProtoTask& t, Entry* e, size_t n) {
    e->version = version_[n];
    e->fits = TaskFits(node, t);
    if (!e->fits) return;
    int64_t before = dist_.FragmentationSum(node.frag);
    core::GpuPicks(node.frag, t.shape, &picks_);
    bool first = true;
    for (const GpuPick& pick : picks_) {
      int64_t s = ScoreOf(node, t, pick, before);
      if (first || s < e->score) {
        e->score = s;
        e->pick = pick;
        first = false;
      }
    }
  }

  int64_t ScoreOf(const ProtoNode& node, const ProtoTask& t, const GpuPick& pick, int64_t before) {
    int64_t after = dist_.FragmentationSum(core::AfterPick(node.frag, t.shape, pick));
    return integer_ ? -FgdIntegerScore(before, after, dist_.size()) : after - before;
  }

  uint64_t Below(int64_t n) { return rng_() % static_cast<uint64_t>(n); }

  bool integer_;
  std::mt19937_64 rng_;
  core::ShapeDistribution dist_;
  std::vector<uint32_t> version_;
  absl::flat_hash_map<std::tuple<int64_t, int32_t, int32_t, uint64_t, int64_t>, int32_t> shape_ids_;
  std::vector<std::vector<Entry>> caches_;
  std::vector<GpuPick> picks_;
};

}  // namespace

int64_t FgdIntegerScore(int64_t before_sum, int64_t after_sum, int64_t tasks) {
  if (tasks <= 0) return 50;
  double drop_gpus = static_cast<double>(before_sum - after_sum) / static_cast<double>(tasks) / 1000.0;
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(-drop_gpus)));
}

bool TaskFits(const ProtoNode& node, const ProtoTask& task) {
  return node.memory_free >= task.memory_mib && core::ShapeFits(node.frag, task.shape);
}

absl::StatusOr<std::unique_ptr<ProtoPolicy>> MakeProtoPolicy(const std::string& name,
                                                            uint64_t seed,
                                                            const std::vector<ProtoTask>& workload) {
  if (name == "first-fit") return std::make_unique<FirstFit>();
  if (name == "best-fit") return std::make_unique<BestFit>();
  if (name == "random") return std::make_unique<RandomFit>(seed);
  if (name == "fgd") return std::make_unique<FragmentationFit>(FragmentationOptions{}, workload, seed);
  if (name == "fgd-int") {
    return std::make_unique<FragmentationFit>(FragmentationOptions{.integer_score = true}, workload,
                                              seed);
  }
  return absl::InvalidArgumentError(absl::StrCat("placement policy '", name,
                                                 "' is unknown; use first-fit, best-fit, random, "
                                                 "fgd, fgd-int, trainyard (core:fragmentation) or "
                                                 "core:PLACEMENT"));
}

}  // namespace trainyard::sim
