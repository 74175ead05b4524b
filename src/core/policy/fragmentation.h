// Fragmentation-aware placement: how much of a node's free GPU capacity the
// tasks likely to come next could not use, and which node and GPUs a task
// should take so that this grows least. The measure is the one of
// Fragmentation Gradient Descent (FGD): for a task shape m, the free GPU
// share of node n that m cannot use is all of it when m does not fit there at
// all (too little CPU, no GPU with enough free share, not enough whole free
// GPUs, a GPU model m may not use), else the free share of the GPUs too small
// for m (a share task cannot use a GPU with less free than it asks; a
// whole-GPU task cannot use a partly used GPU). The node's expected
// fragmentation weighs that by how often each shape is seen. Pure values and
// integer inputs; the caller keeps the distribution current.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/resources/gpu_set.h"

namespace trainyard::core {

// A node as fragmentation sees it: free CPU and the free share of each GPU.
struct FragNode {
  int64_t cpu_free_milli = 0;
  int32_t model = -1;  // index into the caller's model table; -1 = unknown
  int32_t gpu_count = 0;
  std::array<int16_t, kMaxGpus> free{};  // 0..1000 per GPU
};

// The shape of a task: CPU, and whole GPUs (gpus >= 1), a share of one GPU
// (gpus == 0, gpu_milli 1..999) or none; the GPU models it may use as a
// bitmask over the model table (0 = any).
struct TaskShape {
  int64_t cpu_milli = 0;
  int32_t gpus = 0;
  int32_t gpu_milli = 0;
  uint64_t models = 0;
  bool operator==(const TaskShape&) const = default;
  // GPU share asked, in thousandths (whole GPUs count 1000 each).
  int64_t GpuDemand() const { return gpus > 0 ? int64_t{gpus} * 1000 : gpu_milli; }
};

// How often each task shape is seen: the weights of the expectation.
// Shapes with the same GPU demand and models form one class whose CPU sizes
// are kept sorted, so a node's expected fragmentation costs one binary
// search per class, not one pass per shape.
class ShapeDistribution {
 public:
  // Counts `weight` more tasks of shape s; a negative weight forgets tasks
  // counted before. REQUIRES: no count goes below zero.
  void Add(const TaskShape& s, int64_t weight = 1);
  // Number of tasks counted.
  int64_t size() const { return total_; }

  // The node's expected fragmentation in thousandths of a GPU: the mean over
  // counted tasks of the free GPU share they could not use there. 0 with an
  // empty distribution.
  double Fragmentation(const FragNode& node) const;
  // The same times size(): an integer, so two placements that leave the
  // same fragmentation compare equal (deterministic tie-breaks).
  int64_t FragmentationSum(const FragNode& node) const;

  // Trainyard's refinement of the measure, for share shapes: the free GPU
  // share that a stream of shares of that size alone could not take from the
  // node — free share minus what as many such shares as fit (floor(free /
  // share) per GPU, fewer when the node's free CPU runs out first) would
  // use. It sees what FGD's one-task test does not: the sliver a GPU keeps
  // after the shares that fit it (two 0.47 shares leave 0.06), and GPUs
  // stranded once the CPU is taken by the few shares that fit. Whole-GPU and
  // CPU-only shapes are counted as FragmentationSum counts them (a whole free
  // GPU is never a sliver). Shapes that may not use the node's GPU model are
  // left out (FGD counts the node's whole free share as lost to them, which
  // makes filling the node look like a gain and sends unconstrained work
  // where constrained work must go: ModelPressure prices that instead).
  // Summed like FragmentationSum.
  int64_t ReachFragmentationSum(const FragNode& node) const;

  // Who else can use a node: how much of each GPU model's free share the
  // demand that only some models can serve is expected to claim, in
  // thousandths (0..1000), into `out` (one entry per model of
  // `free_by_model`). A set of models that counted shapes name claims its
  // part of the counted GPU demand times the cluster's free share (the
  // demand still to come if the cluster fills up as it has been asked),
  // plus a margin of three standard deviations for the randomness of
  // arrivals, over the free share of its models; a model adds up the claims
  // of the sets it is in, capped at 1000. 0 everywhere when no counted shape
  // names a model. `free_by_model[m]` is model m's free GPU share
  // (thousandths), `free_total` the cluster's.
  void ModelPressure(const std::vector<int64_t>& free_by_model, int64_t free_total,
                     std::vector<int32_t>* out) const;
  // ModelPressure of one model; 0 for an unknown model (-1).
  int32_t PressureOn(int32_t model, const std::vector<int64_t>& free_by_model,
                     int64_t free_total) const;
  // The price of taking `gpu_demand` thousandths of a GPU on a node whose
  // model is under `pressure` (ModelPressure), in FragmentationSum's units
  // (counted tasks x thousandths), so a placement weighs it against the
  // fragmentation it adds. A task that may use only a claimed model fails
  // or waits when the model is full, while unconstrained work has other
  // nodes; so under full pressure one GPU is priced as the most
  // fragmentation one placement can add to a node of the cluster's largest,
  // `max_node_gpus` GPUs (all of its share). A price, not a reservation:
  // unconstrained work still goes there when every other choice costs more.
  int64_t ScarcityCost(int64_t gpu_demand, int32_t pressure, int32_t max_node_gpus) const {
    return total_ * max_node_gpus * gpu_demand * pressure / 1000;
  }
  // True when some counted shape names GPU models.
  bool HasConstrainedDemand() const { return !constrained_.empty(); }

 private:
  struct Class {
    int32_t gpus = 0;
    int32_t gpu_milli = 0;
    uint64_t models = 0;
    std::vector<int64_t> cpu;    // distinct CPU sizes, ascending
    std::vector<int64_t> count;  // tasks per CPU size
    std::vector<int64_t> upto;   // tasks with CPU <= cpu[i]
    int64_t total = 0;
  };
  // GPU demand (thousandths) of counted shapes, all and per set of models
  // named (sets with none left are dropped).
  struct ModelSetDemand {
    uint64_t models = 0;
    int64_t milli = 0;
    int64_t tasks = 0;
  };
  std::vector<Class> classes_;
  int64_t total_ = 0;
  int64_t gpu_demand_ = 0;
  std::vector<ModelSetDemand> constrained_;
};

// True when a task of shape `t` fits on `node` by CPU, model and GPUs
// (memory is the caller's to check).
bool ShapeFits(const FragNode& node, const TaskShape& t);

// One way to put a task on a node: the GPUs it takes (a share takes one).
struct GpuPick {
  GpuSet gpus;
  int32_t milli = 0;  // per GPU taken: 1000 for whole GPUs
};

// Every distinct way a task of shape `t` can take GPUs on `node` as far as
// fragmentation can tell them apart: for a share, one GPU per distinct free
// share that fits (the lowest index); for whole GPUs, the lowest free ones
// (which whole GPUs is a topology question, not one of fragmentation); for
// no GPU, nothing. REQUIRES: ShapeFits(node, t).
void GpuPicks(const FragNode& node, const TaskShape& t, std::vector<GpuPick>* out);

// `node` after a task of shape `t` takes `pick`.
FragNode AfterPick(const FragNode& node, const TaskShape& t, const GpuPick& pick);

}  // namespace trainyard::core
