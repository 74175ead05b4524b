// The hot-path GPU chooser of the scheduler: given a node's free-GPU bitmap
// and topology, picks `count` GPUs at the tightest level (one PCIe switch,
// else one socket, else the node), best fit among groups of that level so
// larger free groups stay whole; or checks an exact mask. Allocation-free
// and branch-light, because it runs once per placed task.
#pragma once

#include <cstdint>

#include "core/resources/gpu_placement.h"
#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

struct GpuFit {
  GpuSet gpus;
  Tightness tightness = Tightness::kNone;
};

// Chooses `count` GPUs from `free`, or exactly `mask` when mask != 0.
// Returns false (leaving *out alone) when the node cannot serve the request
// at `loosest` or tighter.
bool FitGpus(const GpuTopology& topo, GpuSet free, int count, uint64_t mask, Tightness loosest,
             GpuFit* out);

// Chooses the GPU for a share of `milli` thousandths (and `memory_mb` of GPU
// memory, checked where the node knows its GPUs' memory) on `node`: the
// shared GPU whose free share fits tightest (ties: lowest index), so shares
// pack onto GPUs already split; else one whole free GPU from the switch with
// the fewest free GPUs, so whole free groups stay whole. -1 when none fits.
int FitShare(const GpuTopology& topo, const NodeState& node, int milli, int64_t memory_mb);

// How many shares of `milli` (with `memory_mb`) fit on `node` at once.
int SharesFitting(const NodeState& node, int milli, int64_t memory_mb);

// "one PCIe switch", "one socket", "one node", "" for kNone.
const char* TightnessPhrase(Tightness t);

}  // namespace trainyard::core
