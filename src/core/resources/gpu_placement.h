// Choosing GPUs on one node: count-only requests get the tightest free group
// with the least fragmentation left behind; locality requests get exactly
// their mask or nothing.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::core {

// How close together the chosen GPUs sit; lower is tighter.
enum class Tightness : int {
  kNone = 0,    // no GPUs asked for
  kSwitch = 1,  // all under one PCIe switch
  kSocket = 2,  // all under one NUMA socket
  kNode = 3,    // spread over sockets
};
const char* TightnessName(Tightness t);

struct GpuChoice {
  GpuSet gpus;
  Tightness tightness = Tightness::kNone;
};

// Chooses `count` GPUs from `free` on a node of topology `topo`.
// Count-only (mask == 0): the tightest level that fits (switch, else socket,
// else node); among equal levels the choice that leaves the largest free
// aligned groups; ties go to lower indices. Locality (mask != 0): exactly the
// mask.
// Errors: InvalidArgument when count < 0, count > topo.gpu_count(), the mask
// has GPUs outside the node, or count != popcount(mask); ResourceExhausted
// when the free GPUs cannot serve the request (message says what is free).
absl::StatusOr<GpuChoice> ChooseGpus(const GpuTopology& topo, GpuSet free, int count,
                                     uint64_t mask);

// Sets *out to the tightest level at which `count` GPUs are free in `free`,
// without choosing them (kNone when count == 0). Returns false when fewer
// than `count` GPUs are free. Cheaper than ChooseGpus; used to rank nodes.
bool BestTightness(const GpuTopology& topo, GpuSet free, int count, Tightness* out);

// Returns how tight `gpus` sit on `topo`: kNone when empty, kSwitch when all
// under one switch, kSocket when under one socket, else kNode (also for GPUs
// outside the node).
Tightness TightnessOf(const GpuTopology& topo, GpuSet gpus);

// Returns the free GPUs of the group at `level` that has the most of them
// (one switch for kSwitch, one socket for kSocket, all free GPUs for kNode);
// ties go to the lower group. Used to explain why a request waits.
GpuSet LargestFreeGroup(const GpuTopology& topo, GpuSet free, Tightness level);

}  // namespace trainyard::core
