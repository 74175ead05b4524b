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

  // Builds a node with everything free. capacity.gpu_mask == 0 with
  // capacity.gpus > 0 means every GPU is offered. Errors: more than 64 GPUs,
  // a topology whose GPU count differs from capacity.gpus, a mask with GPUs
  // outside the node, negative sizes.
  static absl::StatusOr<NodeResources> Create(const Resource& capacity,
                                              const GpuTopology& topology);
};

// How PlaceOnNode may place a request.
struct PlacementOptions {
  // The loosest GPU tightness the caller accepts. A request whose GPUs can
  // only sit looser fails with ResourceExhausted naming the best free group
  // (e.g. kSwitch: "needs 4 GPUs under one PCIe switch; the best free group
  // is 2 (GPUs 2-3)").
  Tightness loosest = Tightness::kNode;
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
absl::StatusOr<TaskPlacement> PlaceOnNode(const NodeResources& node, const Resource& request,
                                          const PlacementOptions& options);

// Takes `allocation` (as returned by PlaceOnNode) from node->free. Fails,
// changing nothing, when any part of it is not free (double allocation:
// FailedPrecondition) or it is malformed (InvalidArgument: negative sizes,
// gpus != popcount(gpu_mask), a port_count instead of exact ports).
absl::Status Allocate(NodeResources* node, const Resource& allocation);

// Returns `allocation` to node->free. Fails, changing nothing, when any part
// of it is already free or was never the node's (double release:
// FailedPrecondition), or it is malformed (InvalidArgument).
absl::Status Release(NodeResources* node, const Resource& allocation);

}  // namespace trainyard::core
