// NodeResources: placing one task's request on one node (memory, vcores,
// GPUs by topology, ports lowest first) and applying or undoing the result.
// Allocate and Release check every part before changing anything, so a
// double allocation or double release fails and leaves the node as it was.
#include "core/resources/node_resources.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {
namespace {

// InvalidArgument for negative quantities, naming the first one.
absl::Status CheckNonNegative(const Resource& r, absl::string_view what) {
  auto negative = [&](absl::string_view field, int64_t value) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, field, ": ", value, " is negative"));
  };
  if (r.memory_mb < 0) return negative("memory_mb", r.memory_mb);
  if (r.vcores_milli < 0) return negative("vcores_milli", r.vcores_milli);
  if (r.gpus < 0) return negative("gpus", r.gpus);
  if (r.port_count < 0) return negative("port_count", r.port_count);
  return absl::OkStatus();
}

// An allocation must name exactly what it holds.
absl::Status CheckAllocation(const Resource& a) {
  absl::Status s = CheckNonNegative(a, "allocation: ");
  if (!s.ok()) return s;
  if (a.gpus != BitCount(a.gpu_mask)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation: gpus ", a.gpus, " does not match gpu_mask ",
                     GpuSet(a.gpu_mask).ToString(), " (", BitCount(a.gpu_mask), " GPUs)"));
  }
  if (a.port_count != 0) {
    return absl::InvalidArgumentError(
        "allocation: port_count is set; an allocation holds exact ports (use the allocation "
        "PlaceOnNode returned)");
  }
  return absl::OkStatus();
}

const char* LevelWords(Tightness t) {
  return t == Tightness::kSwitch ? "under one PCIe switch" : "within one socket";
}

absl::StatusOr<GpuChoice> PlaceGpus(const NodeResources& node, const Resource& request,
                                    Tightness loosest) {
  GpuSet excluded =
      (GpuSet(request.gpu_mask) & node.topology.all()) - GpuSet(node.capacity.gpu_mask);
  if (!excluded.Empty()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "gpu_mask: GPUs ", excluded.ToString(), " are excluded on this node"));
  }
  absl::StatusOr<GpuChoice> choice =
      ChooseGpus(node.topology, GpuSet(node.free.gpu_mask), request.gpus, request.gpu_mask);
  if (!choice.ok() || choice->tightness <= loosest) return choice;
  GpuSet best = LargestFreeGroup(node.topology, GpuSet(node.free.gpu_mask), loosest);
  return absl::ResourceExhaustedError(absl::StrCat(
      "needs ", request.gpus, " GPUs ", LevelWords(loosest), "; the best free group is ",
      best.Count(), best.Empty() ? "" : " (GPUs ", best.ToString(), best.Empty() ? "" : ")"));
}

absl::StatusOr<PortRanges> PlacePorts(const NodeResources& node, const Resource& request) {
  const PortRanges& served = node.capacity.ports;
  if (!served.ContainsAll(request.ports)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ports: ", request.ports.Subtract(served).ToString(), " are outside this node's range ",
        served.Empty() ? "(none)" : served.ToString()));
  }
  if (!node.free.ports.ContainsAll(request.ports)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ports: ", request.ports.Subtract(node.free.ports).ToString(), " are in use"));
  }
  if (request.port_count == 0) return request.ports;
  PortRanges spare = node.free.ports.Subtract(request.ports);
  std::optional<PortRanges> taken = spare.TakeLowest(static_cast<uint32_t>(request.port_count));
  if (!taken) {
    return absl::ResourceExhaustedError(absl::StrCat("needs ", request.port_count,
                                                     " ports; ", spare.Count(), " are free"));
  }
  return request.ports.Union(*taken);
}

}  // namespace

absl::StatusOr<NodeResources> NodeResources::Create(const Resource& capacity,
                                                    const GpuTopology& topology) {
  absl::Status s = CheckNonNegative(capacity, "node capacity: ");
  if (!s.ok()) return s;
  if (capacity.gpus > kMaxGpus) {
    return absl::InvalidArgumentError(absl::StrCat("node capacity: gpus: ", capacity.gpus,
                                                   " is above the maximum ", kMaxGpus));
  }
  if (capacity.gpus != topology.gpu_count()) {
    return absl::InvalidArgumentError(absl::StrCat("node capacity: gpus is ", capacity.gpus,
                                                   " but the topology has ",
                                                   topology.gpu_count(), " GPUs"));
  }
  GpuSet outside = GpuSet(capacity.gpu_mask) - topology.all();
  if (!outside.Empty()) {
    return absl::InvalidArgumentError(absl::StrCat("node capacity: gpu_mask: GPUs ",
                                                   outside.ToString(), " are outside the node's ",
                                                   capacity.gpus, " GPUs"));
  }
  NodeResources node;
  node.topology = topology;
  node.capacity = capacity;
  node.capacity.port_count = 0;
  if (node.capacity.gpu_mask == 0) node.capacity.gpu_mask = topology.all().bits();
  node.free = node.capacity;
  node.free.gpus = BitCount(node.free.gpu_mask);
  return node;
}

absl::StatusOr<TaskPlacement> PlaceOnNode(const NodeResources& node, const Resource& request) {
  return PlaceOnNode(node, request, PlacementOptions());
}

absl::StatusOr<TaskPlacement> PlaceOnNode(const NodeResources& node, const Resource& request,
                                          const PlacementOptions& options) {
  absl::Status s = CheckNonNegative(request, "");
  if (!s.ok()) return s;
  if (request.memory_mb > node.free.memory_mb) {
    return absl::ResourceExhaustedError(absl::StrCat("needs ", request.memory_mb,
                                                     " MB of memory; ", node.free.memory_mb,
                                                     " MB free of ", node.capacity.memory_mb));
  }
  if (request.vcores_milli > node.free.vcores_milli) {
    return absl::ResourceExhaustedError(
        absl::StrCat("needs ", FormatVcores(request.vcores_milli), " vcores; ",
                     FormatVcores(node.free.vcores_milli), " free of ",
                     FormatVcores(node.capacity.vcores_milli)));
  }
  absl::StatusOr<GpuChoice> gpus = PlaceGpus(node, request, options.loosest);
  if (!gpus.ok()) return gpus.status();
  absl::StatusOr<PortRanges> ports = PlacePorts(node, request);
  if (!ports.ok()) return ports.status();
  TaskPlacement out;
  out.allocation.memory_mb = request.memory_mb;
  out.allocation.vcores_milli = request.vcores_milli;
  out.allocation.gpus = gpus->gpus.Count();
  out.allocation.gpu_mask = gpus->gpus.bits();
  out.allocation.ports = *std::move(ports);
  out.tightness = gpus->tightness;
  return out;
}

absl::Status Allocate(NodeResources* node, const Resource& a) {
  absl::Status s = CheckAllocation(a);
  if (!s.ok()) return s;
  Resource& free = node->free;
  if (a.memory_mb > free.memory_mb || a.vcores_milli > free.vcores_milli) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation needs ", a.memory_mb, " MB and ", FormatVcores(a.vcores_milli),
        " vcores; free are ", free.memory_mb, " MB and ", FormatVcores(free.vcores_milli)));
  }
  GpuSet taken = GpuSet(a.gpu_mask) - GpuSet(free.gpu_mask);
  if (!taken.Empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpu_mask: GPUs ", taken.ToString(), " are not free (allocated twice?)"));
  }
  if (!free.ports.ContainsAll(a.ports)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ports: ", a.ports.Subtract(free.ports).ToString(), " are not free (allocated twice?)"));
  }
  free.memory_mb -= a.memory_mb;
  free.vcores_milli -= a.vcores_milli;
  free.gpu_mask &= ~a.gpu_mask;
  free.gpus = BitCount(free.gpu_mask);
  free.ports = free.ports.Subtract(a.ports);
  return absl::OkStatus();
}

absl::Status Release(NodeResources* node, const Resource& a) {
  absl::Status s = CheckAllocation(a);
  if (!s.ok()) return s;
  Resource& free = node->free;
  const Resource& cap = node->capacity;
  if (a.memory_mb > cap.memory_mb - free.memory_mb ||
      a.vcores_milli > cap.vcores_milli - free.vcores_milli) {
    return absl::FailedPreconditionError(absl::StrCat(
        "releasing ", a.memory_mb, " MB and ", FormatVcores(a.vcores_milli),
        " vcores would free more than is in use (", cap.memory_mb - free.memory_mb, " MB and ",
        FormatVcores(cap.vcores_milli - free.vcores_milli), "); released twice?"));
  }
  GpuSet foreign = GpuSet(a.gpu_mask) - GpuSet(cap.gpu_mask);
  if (!foreign.Empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("gpu_mask: GPUs ", foreign.ToString(), " are not this node's"));
  }
  GpuSet already = GpuSet(a.gpu_mask) & GpuSet(free.gpu_mask);
  if (!already.Empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpu_mask: GPUs ", already.ToString(), " are already free (released twice?)"));
  }
  if (!cap.ports.ContainsAll(a.ports)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ports: ", a.ports.Subtract(cap.ports).ToString(), " are not this node's"));
  }
  PortRanges again = a.ports.Intersect(free.ports);
  if (!again.Empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ports: ", again.ToString(), " are already free (released twice?)"));
  }
  free.memory_mb += a.memory_mb;
  free.vcores_milli += a.vcores_milli;
  free.gpu_mask |= a.gpu_mask;
  free.gpus = BitCount(free.gpu_mask);
  free.ports = free.ports.Union(a.ports);
  return absl::OkStatus();
}

}  // namespace trainyard::core
