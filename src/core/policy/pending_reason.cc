// Pending-reason diagnosis; see pending_reason.h.
#include "core/policy/pending_reason.h"

#include <algorithm>
#include <optional>
#include <tuple>
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
  int64_t memory = -1;
  NodeId memory_node = -1;
  int64_t vcores = -1;
  NodeId vcores_node = -1;
  uint32_t ports = 0;
  NodeId ports_node = -1;
  bool fixed_ports_open = false;  // some node has the exact ports free
  NodeId fixed_ports_node = -1;   // the first node that does not
  int fixed_ports_unserved = 0;   // matching nodes whose range lacks them
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
  if (!state.ModelAllows(role, n)) return false;
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
    if (node.free.memory_mb > b.memory) b.memory = node.free.memory_mb, b.memory_node = n;
    if (node.free.vcores_milli > b.vcores) b.vcores = node.free.vcores_milli, b.vcores_node = n;
    const NodePorts& ports = state.ports(n);
    if (ports.spare.Count() > b.ports) b.ports = ports.spare.Count(), b.ports_node = n;
    if (!role.resource.ports.Empty()) {
      if (!node.capacity.ports.ContainsAll(role.resource.ports)) ++b.fixed_ports_unserved;
      if (ports.open.ContainsAll(role.resource.ports)) {
        b.fixed_ports_open = true;
      } else if (b.fixed_ports_node < 0) {
        b.fixed_ports_node = n;
      }
    }
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
  if (!role.gpu_models.empty()) {
    parts.push_back(absl::StrCat("GPU model ", absl::StrJoin(role.gpu_models, " or ")));
  }
  if (parts.empty()) return "no schedulable node in the cluster (none has registered, or all are down)";
  return absl::StrCat("no schedulable node matches ", absl::StrJoin(parts, " and "));
}

std::string NodeName(const ClusterState& state, NodeId n) {
  return n < 0 ? "none" : state.node(n).name;
}

std::string PortWords(const PortRanges& p) {
  return absl::StrCat(p.Count() == 1 ? "port " : "ports ", p.ToString());
}

// What keeps exact ports `want` from node n: outside its range, held by
// tasks, or in use on the node by something else.
std::string PortsBlockedText(const ClusterState& state, const PortRanges& want, NodeId n) {
  const NodeState& node = state.node(n);
  std::vector<std::string> parts;
  PortRanges outside = want.Subtract(node.capacity.ports);
  PortRanges held = want.Intersect(node.capacity.ports).Subtract(node.free.ports);
  PortRanges in_use = want.Intersect(node.free.ports).Subtract(state.ports(n).open);
  if (!outside.Empty()) {
    parts.push_back(absl::StrCat(outside.ToString(), " outside its range ",
                                 node.capacity.ports.Empty() ? "(none)" : node.capacity.ports.ToString()));
  }
  if (!held.Empty()) parts.push_back(absl::StrCat(held.ToString(), " held by tasks"));
  if (!in_use.Empty()) parts.push_back(absl::StrCat(in_use.ToString(), " in use on the node"));
  return absl::StrCat(node.name, ": ", absl::StrJoin(parts, ", "));
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
  if (!r.ports.Empty() && !b.fixed_ports_open) {
    return absl::StrCat("needs ", PortWords(r.ports), " free on one node; no matching node has ",
                        r.ports.Count() == 1 ? "it" : "them all", " (",
                        PortsBlockedText(state, r.ports, b.fixed_ports_node), ")");
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
  } else if (r.IsGpuShare()) {
    parts.push_back(absl::StrCat(FormatVcores(r.gpu_milli), " of one GPU"));
  }
  if (r.memory_mb > 0) parts.push_back(absl::StrCat(r.memory_mb, " MB memory"));
  if (r.vcores_milli > 0) parts.push_back(absl::StrCat(Vcores(r.vcores_milli), " vcores"));
  if (!r.ports.Empty()) parts.push_back(PortWords(r.ports));
  if (r.port_count > 0) {
    parts.push_back(absl::StrCat(r.port_count, r.port_count == 1 ? " port" : " ports",
                                 r.ports.Empty() ? "" : " more"));
  }
  if (parts.empty()) return "nothing";
  return absl::StrJoin(parts, ", ");
}

// The common case without a scan: a count-only request with no node
// constraints that no schedulable node has enough free GPUs for. The index
// knows the most free GPUs on any node.
std::optional<Diagnosis> GpuShortFromIndex(const ClusterState& state, const RoleRequest& role) {
  const Resource& r = role.resource;
  if (r.gpu_mask != 0 || r.gpus == 0 || !role.node_selector.Empty() || !role.rack.empty() ||
      !role.gpu_models.empty() ||
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

uint64_t GpusOf(const Resource& capacity) {
  uint64_t all = capacity.gpus >= 64 ? ~0ull : (1ull << capacity.gpus) - 1;
  return all | capacity.gpu_mask;
}

// How many tasks of `r` an empty node of `capacity` holds, at most `limit`.
int64_t TasksByCapacity(const Resource& capacity, const Resource& r, int64_t limit) {
  if ((r.gpu_mask & ~GpusOf(capacity)) != 0 || !capacity.ports.ContainsAll(r.ports)) return 0;
  int64_t n = limit;
  auto bound = [&n](int64_t have, int64_t want) {
    if (want > 0) n = std::min(n, have / want);
  };
  bound(capacity.gpus, r.gpus);
  if (r.IsGpuShare()) bound(int64_t{capacity.gpus} * (1000 / r.gpu_milli), 1);
  bound(capacity.memory_mb, r.memory_mb);
  bound(capacity.vcores_milli, r.vcores_milli);
  bound(capacity.ports.Count() - r.ports.Count(), r.port_count);
  // Exact GPUs or ports are the same ones in every task: one per node.
  if (r.gpu_mask != 0 || r.ports.Count() > 0) n = std::min<int64_t>(n, 1);
  return n;
}

// The node with the most capacity (GPUs, then memory, then vcores).
bool Larger(const Resource& a, const Resource& b) {
  return std::tie(a.gpus, a.memory_mb, a.vcores_milli) > std::tie(b.gpus, b.memory_mb, b.vcores_milli);
}

// The first quantity that `largest` cannot hold even when empty.
std::string CapacityShortText(const Resource& r, const Resource& largest) {
  if ((r.gpu_mask & ~GpusOf(largest)) != 0) {
    return absl::StrCat("needs GPUs ", GpuSet(r.gpu_mask).ToString(), " on one node; no matching node has GPU ",
                        GpuSet(r.gpu_mask & ~GpusOf(largest)).ToString());
  }
  if (r.gpus > largest.gpus) return absl::StrCat("needs ", Gpus(r.gpus), " on one node");
  if (r.memory_mb > largest.memory_mb) return absl::StrCat("needs ", r.memory_mb, " MB memory on one node");
  if (r.vcores_milli > largest.vcores_milli) {
    return absl::StrCat("needs ", Vcores(r.vcores_milli), " vcores on one node");
  }
  if (!largest.ports.ContainsAll(r.ports)) {
    return absl::StrCat("needs ports ", r.ports.ToString(), ", which no matching node serves");
  }
  return absl::StrCat("needs ", r.ports.Count() + r.port_count, " ports on one node");
}

// Why a role can never be placed on the nodes the cluster has now, even
// empty: no matching node could hold one task, or all of them together
// could not hold the gang. nullopt when it could fit once work ends. Counts
// nodes that are not schedulable now too (they may come back); stops
// counting as soon as the gang fits, so a large cluster is rarely walked.
std::optional<Diagnosis> NeverFits(const ClusterState& state, const RoleRequest& role, int32_t gang) {
  int64_t held = 0;
  int matching = 0;
  NodeId largest = -1;
  for (NodeId n = 0; n < state.NodeSlots(); ++n) {
    const NodeState& node = state.node(n);
    if (!node.present) continue;
    if (!role.node_name.empty() && !role.relax && node.name != role.node_name) continue;
    if (!role.rack.empty() && (node.rack < 0 || state.racks()[node.rack] != role.rack)) continue;
    if (!role.node_selector.Empty() && !role.node_selector.Matches(state.labels(n))) continue;
    if (!state.ModelAllows(role, n)) continue;
    ++matching;
    held += TasksByCapacity(node.capacity, role.resource, gang - held);
    if (held >= gang) return std::nullopt;
    if (largest < 0 || Larger(node.capacity, state.node(largest).capacity)) largest = n;
  }
  if (matching == 0) return std::nullopt;  // the constraint text says more
  const Resource& cap = state.node(largest).capacity;
  std::string node = absl::StrCat(state.node(largest).name, ": ", DescribeRequest(ScalarsOf(cap)));
  std::string text =
      held == 0 ? absl::StrCat(CapacityShortText(role.resource, cap), "; the largest matching node is ", node)
                : absl::StrCat("gang needs ", gang, " ", role.name, " tasks of ", DescribeRequest(role.resource),
                               " at once; the ", matching, matching == 1 ? " matching node" : " matching nodes",
                               " could hold only ", held, " even when empty (the largest is ", node, ")");
  return Diagnosis{absl::StrCat(kUnschedulablePrefix, text), false};
}

// Why role `role` of job j does not fit; `gang` (null for one task) adds
// how many of a gang's tasks did.
Diagnosis DiagnoseRole(const ClusterState& state, const GangPlacer& placer, JobSlot j,
                       const RoleRequest& role, const PlaceResult* gang) {
  if (std::optional<Diagnosis> never = NeverFits(state, role, gang != nullptr ? role.MinAvailable() : 1)) {
    return *never;
  }
  if (std::optional<Diagnosis> fast = GpuShortFromIndex(state, role)) return *fast;
  Best b = Survey(state, placer, j, role);
  if (b.matching == 0) return Diagnosis{ConstraintText(state, role), false};
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
    if (!role.resource.ports.Empty()) {
      absl::StrAppend(&text, " (a node gives ", PortWords(role.resource.ports), " to one task at a time");
      if (b.fixed_ports_unserved > 0) {
        absl::StrAppend(&text, "; ", b.fixed_ports_unserved, " of ", b.matching,
                        " matching nodes do not serve ", role.resource.ports.Count() == 1 ? "it" : "them");
      }
      absl::StrAppend(&text, ")");
    }
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
