// Pending-reason diagnosis; see pending_reason.h.
#include "core/policy/pending_reason.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/policy/gpu_fit.h"

namespace trainyard::core {
namespace {

std::string Gpus(int64_t n) { return absl::StrCat(n, n == 1 ? " GPU" : " GPUs"); }

std::string Vcores(int64_t milli) { return absl::StrFormat("%.1f", milli / 1000.0); }

// The best free quantity of each kind over the nodes that pass constraints.
struct Best {
  int gpus = -1;
  NodeId gpus_node = -1;
  int capacity_gpus = -1;
  int64_t memory = -1;
  NodeId memory_node = -1;
  int64_t vcores = -1;
  NodeId vcores_node = -1;
  uint32_t ports = 0;
  NodeId ports_node = -1;
  bool mask_free = false;
  int matching = 0;
  int fit_ignoring_reservations = 0;
  int fit = 0;
  JobSlot reserved_by = -1;
};

bool PassesConstraints(const ClusterState& state, const RoleRequest& role, NodeId n) {
  const NodeState& node = state.node(n);
  if (!node.present || !node.schedulable) return false;
  if (!role.node_name.empty() && !role.relax && node.name != role.node_name) return false;
  if (!role.rack.empty() && (node.rack < 0 || state.racks()[node.rack] != role.rack)) {
    return false;
  }
  return role.node_selector.Empty() || role.node_selector.Matches(state.labels(n));
}

Best Survey(const ClusterState& state, const GangPlacer& placer, JobSlot j,
            const RoleRequest& role) {
  Best b;
  for (NodeId n = 0; n < state.NodeSlots(); ++n) {
    if (!PassesConstraints(state, role, n)) continue;
    const NodeState& node = state.node(n);
    ++b.matching;
    if (node.free.gpus > b.gpus) b.gpus = node.free.gpus, b.gpus_node = n;
    b.capacity_gpus = std::max(b.capacity_gpus, node.capacity.gpus);
    if (node.free.memory_mb > b.memory) b.memory = node.free.memory_mb, b.memory_node = n;
    if (node.free.vcores_milli > b.vcores) b.vcores = node.free.vcores_milli, b.vcores_node = n;
    if (node.free.ports.Count() > b.ports) b.ports = node.free.ports.Count(), b.ports_node = n;
    if (role.resource.gpu_mask != 0 && GpuSet(node.free.gpu_mask).ContainsAll(GpuSet(role.resource.gpu_mask))) {
      b.mask_free = true;
    }
    if (placer.FitsOneTask(j, role, n, /*ignore_reservations=*/true)) {
      ++b.fit_ignoring_reservations;
      if (placer.FitsOneTask(j, role, n, /*ignore_reservations=*/false)) {
        ++b.fit;
      } else if (b.reserved_by < 0) {
        b.reserved_by = node.reserved_for;
      }
    }
  }
  return b;
}

std::string ConstraintText(const ClusterState& state, const RoleRequest& role) {
  if (!role.node_name.empty() && !role.relax) {
    std::optional<NodeId> n = state.FindNode(role.node_name);
    if (!n.has_value()) return absl::StrCat("node ", role.node_name, " is not in the cluster");
    if (!state.node(*n).schedulable) {
      return absl::StrCat("node ", role.node_name, " is not schedulable");
    }
  }
  std::vector<std::string> parts;
  if (!role.node_name.empty() && !role.relax) parts.push_back("node " + role.node_name);
  if (!role.rack.empty()) parts.push_back("rack " + role.rack);
  if (!role.node_selector.Empty()) parts.push_back(role.node_selector.ToString());
  return absl::StrCat("no schedulable node matches ", absl::StrJoin(parts, " and "));
}

std::string NodeName(const ClusterState& state, NodeId n) {
  return n < 0 ? "none" : state.node(n).name;
}

// The first quantity no single node has enough of.
std::string ShortText(const ClusterState& state, const RoleRequest& role, const Best& b) {
  const Resource& r = role.resource;
  if (r.gpu_mask != 0 && !b.mask_free) {
    return absl::StrCat("needs GPUs ", GpuSet(r.gpu_mask).ToString(),
                        " free on one node; no matching node has them all free");
  }
  if (r.gpus > b.gpus) {
    return absl::StrCat("needs ", Gpus(r.gpus), " on one node; the most free on one node is ",
                        b.gpus, " (", NodeName(state, b.gpus_node), ")");
  }
  if (r.memory_mb > b.memory) {
    return absl::StrCat("needs ", r.memory_mb, " MB memory on one node; the most free is ",
                        b.memory, " MB (", NodeName(state, b.memory_node), ")");
  }
  if (r.vcores_milli > b.vcores) {
    return absl::StrCat("needs ", Vcores(r.vcores_milli), " vcores on one node; the most free is ",
                        Vcores(b.vcores), " (", NodeName(state, b.vcores_node), ")");
  }
  uint32_t ports = r.ports.Count() + static_cast<uint32_t>(r.port_count);
  if (ports > b.ports) {
    return absl::StrCat("needs ", ports, " ports on one node; the most free is ", b.ports, " (",
                        NodeName(state, b.ports_node), ")");
  }
  return absl::StrCat("no node has ", DescribeRequest(r), " free at once");
}

}  // namespace

std::string DescribeRequest(const Resource& r) {
  std::vector<std::string> parts;
  if (r.gpu_mask != 0) {
    parts.push_back(absl::StrCat("GPUs ", GpuSet(r.gpu_mask).ToString()));
  } else if (r.gpus > 0) {
    parts.push_back(Gpus(r.gpus));
  }
  if (r.memory_mb > 0) parts.push_back(absl::StrCat(r.memory_mb, " MB memory"));
  if (r.vcores_milli > 0) parts.push_back(absl::StrCat(Vcores(r.vcores_milli), " vcores"));
  uint32_t ports = r.ports.Count() + static_cast<uint32_t>(r.port_count);
  if (ports > 0) parts.push_back(absl::StrCat(ports, ports == 1 ? " port" : " ports"));
  if (parts.empty()) return "nothing";
  return absl::StrJoin(parts, ", ");
}

// The common case without a scan: a count-only request with no node
// constraints that no schedulable node has enough free GPUs for. The index
// knows the most free GPUs on any node.
std::optional<Diagnosis> GpuShortFromIndex(const ClusterState& state, const RoleRequest& role) {
  const Resource& r = role.resource;
  if (r.gpu_mask != 0 || r.gpus == 0 || !role.node_selector.Empty() || !role.rack.empty() ||
      (!role.node_name.empty() && !role.relax) || r.gpus > state.MaxNodeGpus()) {
    return std::nullopt;
  }
  int most = -1;
  NodeId node = -1;
  for (const auto& [key, nodes] : state.index().buckets()) {
    int free = NodeIndex::ShapeOfKey(key).free;
    if (free < most) continue;
    NodeId first = *std::min_element(nodes.begin(), nodes.end());
    if (free > most || first < node) {
      most = free;
      node = first;
    }
  }
  if (node < 0 || most >= r.gpus) return std::nullopt;
  return Diagnosis{absl::StrCat("needs ", Gpus(r.gpus), " on one node; the most free on one node is ",
                                most, " (", state.node(node).name, ")"),
                   true};
}

namespace {

// Why role `role` of job j does not fit; `gang` (null for one task) adds
// how many of a gang's tasks did.
Diagnosis DiagnoseRole(const ClusterState& state, const GangPlacer& placer, JobSlot j,
                       const RoleRequest& role, const PlaceResult* gang) {
  if (std::optional<Diagnosis> fast = GpuShortFromIndex(state, role)) return *fast;
  Best b = Survey(state, placer, j, role);
  if (b.matching == 0) return Diagnosis{ConstraintText(state, role), false};
  if (role.resource.gpus > b.capacity_gpus) {
    return Diagnosis{absl::StrCat("needs ", Gpus(role.resource.gpus),
                                  " on one node; the largest matching node has ",
                                  b.capacity_gpus),
                     false};
  }
  if (b.fit == 0 && b.fit_ignoring_reservations > 0 && b.reserved_by >= 0) {
    return Diagnosis{absl::StrCat("waiting behind reservation for job ",
                                  state.job(b.reserved_by).request.id),
                     true};
  }
  if (gang != nullptr && (b.fit > 0 || b.fit_ignoring_reservations > 0)) {
    std::string text = absl::StrCat(
        "gang needs ", role.MinAvailable(), " ", role.name, role.MinAvailable() == 1 ? " task of " : " tasks of ",
        DescribeRequest(role.resource), " at once; only ", gang->short_placed, " fit now");
    if (gang->blocked_by_reservation) absl::StrAppend(&text, " outside reserved nodes");
    return Diagnosis{text, true};
  }
  return Diagnosis{ShortText(state, role, b), true};
}

}  // namespace

Diagnosis DiagnosePlacement(const ClusterState& state, const GangPlacer& placer, JobSlot j,
                            const PlaceResult& result) {
  const RoleRequest& role = state.job(j).request.roles[result.short_role];
  return DiagnoseRole(state, placer, j, role, &result);
}

Diagnosis DiagnoseTask(const ClusterState& state, const GangPlacer& placer, JobSlot j,
                       int32_t role) {
  return DiagnoseRole(state, placer, j, state.job(j).request.roles[role], nullptr);
}

}  // namespace trainyard::core
