// The FGD fragmentation measure over a shape distribution; see fragmentation.h.
#include "core/policy/fragmentation.h"

#include <algorithm>
#include <cmath>

namespace trainyard::core {
namespace {

// Standard deviations of the constrained demand still to come that a
// model's pressure keeps in hand (ModelPressure).
constexpr double kArrivalMargin = 3;

// The parts of a node's free GPU share that every class reads: free
// shares ascending, their total, and the whole free GPUs.
struct GpuSummary {
  std::array<int16_t, kMaxGpus> sorted{};
  int32_t n = 0;
  int64_t total = 0;
  int32_t whole = 0;
  int32_t largest = 0;
};

GpuSummary Summarize(const FragNode& node) {
  GpuSummary s;
  for (int g = 0; g < node.gpu_count; ++g) {
    int16_t f = node.free[g];
    if (f <= 0) continue;
    s.total += f;
    if (f >= 1000) ++s.whole;
    // Insertion sort: at most a handful of GPUs hold free share.
    int i = s.n++;
    while (i > 0 && s.sorted[i - 1] > f) {
      s.sorted[i] = s.sorted[i - 1];
      --i;
    }
    s.sorted[i] = f;
  }
  s.largest = s.n > 0 ? s.sorted[s.n - 1] : 0;
  return s;
}

bool ModelOk(uint64_t models, int32_t model) {
  if (models == 0) return true;
  return model >= 0 && model < 64 && ((models >> model) & 1) != 0;
}

// Free share the class's tasks could not use on a node where their CPU fits.
int64_t UnusableByGpu(const GpuSummary& s, int32_t gpus, int32_t gpu_milli) {
  if (gpus == 0 && gpu_milli == 0) return s.total;  // a CPU task uses no GPU
  if (gpus > 0) return s.whole >= gpus ? s.total - int64_t{s.whole} * 1000 : s.total;
  if (s.largest < gpu_milli) return s.total;
  int64_t small = 0;
  for (int i = 0; i < s.n && s.sorted[i] < gpu_milli; ++i) small += s.sorted[i];
  return small;
}

// How many shares of `milli` the free GPUs hold at once.
int64_t GpuSlots(const GpuSummary& s, int32_t milli) {
  int64_t slots = 0;
  for (int i = 0; i < s.n; ++i) slots += s.sorted[i] / milli;
  return slots;
}

// FGD's sum for one class of shapes: tasks whose CPU fits lose what their
// GPU test cannot use, the others all of the free share. A template so it
// takes the distribution's private class type without naming it.
template <typename ShapeClass>
int64_t FgdClassSum(const ShapeClass& c, const GpuSummary& s, int64_t cpu_free) {
  auto end = std::upper_bound(c.cpu.begin(), c.cpu.end(), cpu_free);
  int64_t fits = end == c.cpu.begin() ? 0 : c.upto[end - c.cpu.begin() - 1];
  return fits * UnusableByGpu(s, c.gpus, c.gpu_milli) + (c.total - fits) * s.total;
}

}  // namespace

void ShapeDistribution::Add(const TaskShape& t, int64_t weight) {
  auto it = std::find_if(classes_.begin(), classes_.end(), [&](const Class& c) {
    return c.gpus == t.gpus && c.gpu_milli == t.gpu_milli && c.models == t.models;
  });
  if (it == classes_.end()) {
    classes_.push_back(Class{.gpus = t.gpus, .gpu_milli = t.gpu_milli, .models = t.models});
    it = classes_.end() - 1;
  }
  Class& c = *it;
  auto pos = std::lower_bound(c.cpu.begin(), c.cpu.end(), t.cpu_milli);
  size_t i = pos - c.cpu.begin();
  if (pos == c.cpu.end() || *pos != t.cpu_milli) {
    c.cpu.insert(pos, t.cpu_milli);
    c.count.insert(c.count.begin() + i, 0);
    c.upto.insert(c.upto.begin() + i, i == 0 ? 0 : c.upto[i - 1]);
  }
  c.count[i] += weight;
  for (size_t k = i; k < c.upto.size(); ++k) c.upto[k] += weight;
  c.total += weight;
  total_ += weight;
  int64_t demand = weight * t.GpuDemand();
  gpu_demand_ += demand;
  if (t.models == 0 || demand == 0) return;
  auto set = std::find_if(constrained_.begin(), constrained_.end(),
                          [&](const ModelSetDemand& d) { return d.models == t.models; });
  if (set == constrained_.end()) {
    constrained_.push_back(ModelSetDemand{.models = t.models});
    set = constrained_.end() - 1;
  }
  set->milli += demand;
  set->tasks += weight;
  if (set->milli <= 0 || set->tasks <= 0) constrained_.erase(set);
}

int32_t ShapeDistribution::PressureOn(int32_t model, const std::vector<int64_t>& free_by_model,
                                      int64_t free_total) const {
  if (model < 0 || model >= 64 || gpu_demand_ <= 0 || free_total <= 0) return 0;
  double claim = 0;
  for (const ModelSetDemand& d : constrained_) {
    if (((d.models >> model) & 1) == 0) continue;
    int64_t set_free = 0;
    for (size_t m = 0; m < free_by_model.size() && m < 64; ++m) {
      if ((d.models >> m) & 1) set_free += free_by_model[m];
    }
    if (set_free <= 0) return 1000;
    // The set's demand still to come: its part of the demand times what
    // is free. Doubles: the product of two shares would overflow.
    double expected = static_cast<double>(d.milli) / static_cast<double>(gpu_demand_) *
                      static_cast<double>(free_total);
    // Arrivals are random: n tasks of mean size s bring n*s give or take
    // sqrt(n)*s, so the claim keeps a margin of kArrivalMargin of those.
    double size = static_cast<double>(d.milli) / static_cast<double>(d.tasks);
    expected += kArrivalMargin * std::sqrt(expected * size);
    claim += expected / static_cast<double>(set_free);
  }
  return static_cast<int32_t>(std::min(1000.0, 1000.0 * claim));
}

void ShapeDistribution::ModelPressure(const std::vector<int64_t>& free_by_model,
                                      int64_t free_total, std::vector<int32_t>* out) const {
  out->resize(free_by_model.size());
  for (size_t m = 0; m < free_by_model.size(); ++m) {
    (*out)[m] = PressureOn(static_cast<int32_t>(m), free_by_model, free_total);
  }
}

double ShapeDistribution::Fragmentation(const FragNode& node) const {
  if (total_ == 0) return 0;
  return static_cast<double>(FragmentationSum(node)) / static_cast<double>(total_);
}

int64_t ShapeDistribution::FragmentationSum(const FragNode& node) const {
  GpuSummary s = Summarize(node);
  if (s.total == 0) return 0;
  int64_t sum = 0;  // tasks x thousandths: exact, so ties stay ties
  for (const Class& c : classes_) {
    if (!ModelOk(c.models, node.model)) {
      sum += c.total * s.total;
      continue;
    }
    sum += FgdClassSum(c, s, node.cpu_free_milli);
  }
  return sum;
}

int64_t ShapeDistribution::ReachFragmentationSum(const FragNode& node) const {
  GpuSummary s = Summarize(node);
  if (s.total == 0) return 0;
  int64_t sum = 0;
  for (const Class& c : classes_) {
    // A shape that may not use the node's model is left out: counting the
    // node's whole free share as lost to it would make filling the node
    // look like a gain, and so send unconstrained work to exactly the
    // models constrained shapes need (ModelPressure prices that instead).
    if (!ModelOk(c.models, node.model)) continue;
    bool cpu_task = c.gpus == 0 && c.gpu_milli == 0;
    if (cpu_task) {
      sum += c.total * s.total;
      continue;
    }
    if (c.gpus > 0) {
      // A whole free GPU is never a sliver (every shape can use it): FGD's
      // one-task test stands for whole-GPU shapes.
      sum += FgdClassSum(c, s, node.cpu_free_milli);
      continue;
    }
    int64_t per_task = c.gpu_milli;
    int64_t slots = GpuSlots(s, c.gpu_milli);
    // Sizes whose CPU lets every GPU slot fill use slots x per_task; larger
    // ones only as many as the CPU allows; those above the free CPU none.
    for (size_t i = 0; i < c.cpu.size(); ++i) {
      if (c.count[i] == 0) continue;
      int64_t by_cpu = c.cpu[i] == 0 ? slots : node.cpu_free_milli / c.cpu[i];
      int64_t used = std::min(slots, by_cpu) * per_task;
      sum += c.count[i] * (s.total - used);
    }
  }
  return sum;
}

bool ShapeFits(const FragNode& node, const TaskShape& t) {
  if (node.cpu_free_milli < t.cpu_milli || !ModelOk(t.models, node.model)) return false;
  if (t.gpus == 0 && t.gpu_milli == 0) return true;
  int whole = 0;
  for (int g = 0; g < node.gpu_count; ++g) {
    if (t.gpus == 0 && node.free[g] >= t.gpu_milli) return true;
    if (node.free[g] >= 1000) ++whole;
  }
  return t.gpus > 0 && whole >= t.gpus;
}

void GpuPicks(const FragNode& node, const TaskShape& t, std::vector<GpuPick>* out) {
  out->clear();
  if (t.gpus == 0 && t.gpu_milli == 0) {
    out->push_back(GpuPick{});
    return;
  }
  if (t.gpus > 0) {
    GpuSet taken;
    for (int g = 0; g < node.gpu_count && taken.Count() < t.gpus; ++g) {
      if (node.free[g] >= 1000) taken = taken | GpuSet(uint64_t{1} << g);
    }
    out->push_back(GpuPick{.gpus = taken, .milli = 1000});
    return;
  }
  uint64_t seen_values[17] = {};  // a bit per free value 0..1000
  for (int g = 0; g < node.gpu_count; ++g) {
    int f = node.free[g];
    if (f < t.gpu_milli) continue;
    uint64_t& word = seen_values[f >> 6];
    uint64_t bit = uint64_t{1} << (f & 63);
    if (word & bit) continue;
    word |= bit;
    out->push_back(GpuPick{.gpus = GpuSet(uint64_t{1} << g), .milli = t.gpu_milli});
  }
}

FragNode AfterPick(const FragNode& node, const TaskShape& t, const GpuPick& pick) {
  FragNode after = node;
  after.cpu_free_milli -= t.cpu_milli;
  for (uint64_t m = pick.gpus.bits(); m != 0; m &= m - 1) {
    int g = __builtin_ctzll(m);
    after.free[g] = static_cast<int16_t>(after.free[g] - pick.milli);
  }
  return after;
}

}  // namespace trainyard::core
