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
  // The shape weights come from the tasks seen so far; otherwise from the
  // whole workload given up front (the FGD artifact's "typical pods").
  bool learn = false;
  // Trainyard's refinements: the measure that also sees the slivers shares
  // leave and GPUs stranded by CPU (ShapeDistribution::
  // ReachFragmentationSum), ties broken by the least leftover (best fit),
  // whole GPUs of a multi-GPU task chosen by topology.
  bool refined = false;
  // The published FGD code's score: an integer, 100 x the logistic of the
  // drop in the node's expected fragmentation in GPUs, rounded down
  // (FgdIntegerScore); nodes of equal score tie, and a tie is broken at
  // random (seeded), as the Kubernetes scheduler framework breaks it.
  bool integer_score = false;
};

// Least growth of expected fragmentation (core/policy/fragmentation.h).
// A node's best placement for a task shape changes only when the node or the
// weights do, so it is kept per (shape, node) and recomputed only then: a
// run costs a pass over the cluster per shape and per change, not per task.
class FragmentationFit : public ProtoPolicy {
 public:
  FragmentationFit(FragmentationOptions o, const std::vector<ProtoTask>& workload, uint64_t seed)
      : learn_(o.learn), refined_(o.refined), integer_(o.integer_score), rng_(seed) {
    if (!learn_) {
      for (const ProtoTask& t : workload) Learn(t);
    }
  }

  void Arrived(const ProtoTask& t) override {
    if (!learn_) return;
    Learn(t);
    // The weights settle quickly; rescoring after every arrival would cost
    // a pass over the cluster per task for no visible change.
    int64_t seen = ++seen_;
    if ((seen & (seen - 1)) == 0 || seen % 1024 == 0) ++epoch_;
  }

  void Changed(int32_t n) override {
    if (static_cast<size_t>(n) < version_.size()) ++version_[n];
    // Before the first count every node is counted anyway.
    if (!node_free_.empty()) changed_.push_back(n);
  }

  bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& t, ProtoChoice* out) override {
    if (version_.size() != nodes.size()) version_.assign(nodes.size(), 0);
    std::vector<Entry>& cache = CacheFor(t, nodes.size());
    bool priced = refined_ && dist_.HasConstrainedDemand() && t.shape.GpuDemand() > 0;
    if (priced) UpdatePressure(nodes);
    Score best_score;
    const Entry* best = nullptr;
    int32_t best_node = -1;
    int64_t ties = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      Entry& e = cache[n];
      if (e.version != version_[n] || e.epoch != epoch_) Evaluate(nodes[n], t, &e, n);
      if (!e.fits) continue;
      Score s = e.score;
      int32_t model = nodes[n].frag.model;
      if (priced && model >= 0) {
        s.growth += dist_.ScarcityCost(t.shape.GpuDemand(), pressure_[model], max_gpus_);
      }
      bool take = best == nullptr || s < best_score;
      if (take) {
        ties = 1;
      } else if (integer_ && !(best_score < s)) {
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
    if (refined_ && t.shape.gpus > 1) out->pick = TopologyPick(nodes[best_node], t);
    return true;
  }

 private:
  struct Score {
    int64_t growth = 0;
    double leftover = 0;
    bool operator<(const Score& o) const {
      return growth != o.growth ? growth < o.growth : leftover < o.leftover;
    }
  };
  struct Entry {
    uint32_t version = ~0u;
    uint32_t epoch = ~0u;
    bool fits = false;
    Score score;
    GpuPick pick;
  };

  void Learn(const ProtoTask& t) {
    dist_.Add(t.shape);
  }

  // Free GPU share per model and in all, kept from each node's last count;
  // then each model's pressure (ShapeDistribution::ModelPressure).
  void UpdatePressure(const std::vector<ProtoNode>& nodes) {
    if (node_free_.size() != nodes.size()) {
      node_free_.assign(nodes.size(), 0);
      free_total_ = 0;
      model_free_.clear();
      changed_.clear();
      for (size_t n = 0; n < nodes.size(); ++n) changed_.push_back(static_cast<int32_t>(n));
    }
    for (int32_t n : changed_) {
      max_gpus_ = std::max(max_gpus_, nodes[n].frag.gpu_count);
      int64_t now = GpuFree(nodes[n].frag);
      int32_t model = nodes[n].frag.model;
      free_total_ += now - node_free_[n];
      if (model >= 0) {
        if (model_free_.size() <= static_cast<size_t>(model)) model_free_.resize(model + 1, 0);
        model_free_[model] += now - node_free_[n];
      }
      node_free_[n] = now;
    }
    changed_.clear();
    dist_.ModelPressure(model_free_, free_total_, &pressure_);
  }

  std::vector<Entry>& CacheFor(const ProtoTask& t, size_t nodes) {
    auto key = std::make_tuple(t.shape.cpu_milli, t.shape.gpus, t.shape.gpu_milli, t.shape.models,
                               t.memory_mib);
    auto [it, fresh] = shape_ids_.try_emplace(key, static_cast<int32_t>(caches_.size()));
    if (fresh) caches_.emplace_back(nodes);
    return caches_[it->second];
  }

  void Evaluate(const ProtoNode& node, const ProtoTask& t, Entry* e, size_t n) {
    e->version = version_[n];
    e->epoch = epoch_;
    e->fits = TaskFits(node, t);
    if (!e->fits) return;
    int64_t before = Frag(node.frag);
    core::GpuPicks(node.frag, t.shape, &picks_);
    bool first = true;
    for (const GpuPick& pick : picks_) {
      Score s = ScoreOf(node, t, pick, before);
      if (first || s < e->score) {
        e->score = s;
        e->pick = pick;
        first = false;
      }
    }
  }

  Score ScoreOf(const ProtoNode& node, const ProtoTask& t, const GpuPick& pick, int64_t before) {
    FragNode after = core::AfterPick(node.frag, t.shape, pick);
    if (integer_) return Score{-FgdIntegerScore(before, Frag(after), dist_.size()), 0};
    int64_t growth = Frag(after) - before;
    if (!refined_) return Score{growth, 0};
    double leftover = 0.5 * static_cast<double>(after.cpu_free_milli) / 128000.0 +
                      0.5 * static_cast<double>(GpuFree(after)) / 8000.0;
    return Score{growth, leftover};
  }

  // Whole GPUs by the core's topology choice: the tightest free group.
  static GpuPick TopologyPick(const ProtoNode& node, const ProtoTask& t) {
    uint64_t whole = 0;
    for (int g = 0; g < node.frag.gpu_count; ++g) {
      if (node.frag.free[g] >= 1000) whole |= uint64_t{1} << g;
    }
    core::GpuFit fit;
    if (node.topology == nullptr ||
        !core::FitGpus(*node.topology, GpuSet(whole), t.shape.gpus, 0, core::Tightness::kNode,
                       &fit)) {
      return LowestPick(node.frag, t.shape);
    }
    return GpuPick{.gpus = fit.gpus, .milli = 1000};
  }

  int64_t Frag(const FragNode& n) const {
    return refined_ ? dist_.ReachFragmentationSum(n) : dist_.FragmentationSum(n);
  }

  uint64_t Below(int64_t n) { return rng_() % static_cast<uint64_t>(n); }

  bool learn_;
  bool refined_;
  bool integer_;
  std::mt19937_64 rng_;
  core::ShapeDistribution dist_;
  uint32_t epoch_ = 0;
  int64_t seen_ = 0;
  std::vector<uint32_t> version_;
  absl::flat_hash_map<std::tuple<int64_t, int32_t, int32_t, uint64_t, int64_t>, int32_t> shape_ids_;
  std::vector<std::vector<Entry>> caches_;
  std::vector<GpuPick> picks_;
  // UpdatePressure's counts: nodes changed since, each node's free share as
  // last counted, free share per model and in all, pressure per model.
  std::vector<int32_t> changed_;
  std::vector<int64_t> node_free_;
  std::vector<int64_t> model_free_;
  int64_t free_total_ = 0;
  int32_t max_gpus_ = 0;
  std::vector<int32_t> pressure_;
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
  if (name == "trainyard") {
    return std::make_unique<FragmentationFit>(FragmentationOptions{.refined = true}, workload, seed);
  }
  if (name == "trainyard-online") {
    return std::make_unique<FragmentationFit>(FragmentationOptions{.learn = true, .refined = true},
                                              workload, seed);
  }
  return absl::InvalidArgumentError(absl::StrCat("placement policy '", name,
                                                 "' is unknown; use first-fit, best-fit, random, "
                                                 "fgd, fgd-int, trainyard, trainyard-online or "
                                                 "core:PLACEMENT"));
}

}  // namespace trainyard::sim
