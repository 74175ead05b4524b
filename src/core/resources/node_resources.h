// NodeResources: what one node has and what is free on it, and the placement
// of one task's request on it (GPUs by topology, ports lowest first).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/resources/gpu_placement.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/resource.h"

namespace trainyard::core {

struct NodeResources {
  // memory, vcores, gpus (== topology.gpu_count()), gpu_mask (all GPUs the
  // node offers: excluded GPUs are left out) and ports (the served range).
  Resource capacity;
  GpuTopology topology;
  // What is free now: gpu_mask is the free-GPU bitmap, gpus its popcount,
  // ports the free ports.
  Resource free;

  // Builds a node with everything free. Errors: more than 64 GPUs, a
  // topology whose GPU count differs from capacity.gpus, negative sizes.
  static absl::StatusOr<NodeResources> Create(const Resource& capacity,
                                              const GpuTopology& topology);
};

// The outcome of placing one request on one node.
struct TaskPlacement {
  Resource allocation;  // memory, vcores, gpus, the exact gpu_mask and ports
  Tightness tightness = Tightness::kNone;
};

// Chooses what `request` would get on `node` without changing it.
// Errors: InvalidArgument for a request that can never be valid (mask and
// count disagree, mask outside the node); ResourceExhausted naming the first
// quantity that is short (e.g. "needs 4 GPUs under one PCIe switch ...").
absl::StatusOr<TaskPlacement> PlaceOnNode(const NodeResources& node, const Resource& request);

// Takes `allocation` (as returned by PlaceOnNode) from node->free. Fails,
// changing nothing, when any part of it is not free (double allocation).
absl::Status Allocate(NodeResources* node, const Resource& allocation);

// Returns `allocation` to node->free. Fails, changing nothing, when any part
// of it is already free or was never the node's (double release).
absl::Status Release(NodeResources* node, const Resource& allocation);

}  // namespace trainyard::core
