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
  // GPU is never a sliver). Summed like FragmentationSum.
  int64_t ReachFragmentationSum(const FragNode& node) const;

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
  std::vector<Class> classes_;
  int64_t total_ = 0;
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
