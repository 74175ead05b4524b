// GpuTopology::FromLinkMatrix: groups from pairwise links (as NVML reports
// them, or as read from `nvidia-smi topo -m`). Relations are GPU bitmaps (at
// most 64 GPUs, so each is one uint64_t per GPU).
#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::core {
namespace {

constexpr char kLinksWhat[] = "link matrix: ";
using Adjacency = std::array<uint64_t, kMaxGpus>;

// Connected components of a symmetric relation, in order of lowest GPU.
std::vector<GpuSet> Components(const Adjacency& adj, int n) {
  std::vector<GpuSet> out;
  uint64_t unseen = GpuSet::FirstN(n).bits();
  while (unseen != 0) {
    uint64_t comp = unseen & (~unseen + 1);
    uint64_t frontier = comp;
    while (frontier != 0) {
      int g = __builtin_ctzll(frontier);
      frontier &= frontier - 1;
      uint64_t grow = adj[g] & unseen & ~comp;
      comp |= grow;
      frontier |= grow;
    }
    unseen &= ~comp;
    out.push_back(GpuSet(comp));
  }
  return out;
}

// Greedy split into groups where every pair is NV-linked; groups of one GPU
// are dropped (that GPU has no NVLink peer in a group).
std::vector<GpuSet> Cliques(const Adjacency& nv, int n) {
  std::vector<GpuSet> out;
  uint64_t left = GpuSet::FirstN(n).bits();
  while (left != 0) {
    uint64_t group = left & (~left + 1);
    uint64_t candidates = nv[__builtin_ctzll(group)] & left;
    while (candidates != 0) {
      int g = __builtin_ctzll(candidates);
      candidates &= candidates - 1;
      if ((group & ~nv[g]) == 0) group |= uint64_t{1} << g;
    }
    left &= ~group;
    if (BitCount(group) > 1) out.push_back(GpuSet(group));
  }
  return out;
}

// Checks the shape (square, n <= kMaxGpus, nvlink empty or n rows, no bits
// outside the node) and that every relation reads the same both ways.
absl::Status CheckMatrix(const GpuLinkMatrix& m) {
  const size_t n = m.pcie.size();
  if (n > static_cast<size_t>(kMaxGpus)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kLinksWhat, n, " GPUs; a node has at most ", kMaxGpus));
  }
  for (size_t a = 0; a < n; ++a) {
    if (m.pcie[a].size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat(kLinksWhat, "row GPU", a, " has ", m.pcie[a].size(), " entries, not ", n));
    }
  }
  if (!m.nvlink.empty() && m.nvlink.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kLinksWhat, "nvlink has ", m.nvlink.size(), " rows, not ", n));
  }
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      if (m.pcie[a][b] != m.pcie[b][a]) {
        return absl::InvalidArgumentError(absl::StrCat(
            kLinksWhat, "GPU", a, "-GPU", b, " is ", PcieLinkName(m.pcie[a][b]), " but GPU", b, "-GPU",
            a, " is ", PcieLinkName(m.pcie[b][a])));
      }
      if (!m.nvlink.empty() && (m.nvlink[a] >> b & 1) != (m.nvlink[b] >> a & 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat(kLinksWhat, "NVLink between GPU", a, " and GPU", b, " is given one way only"));
      }
    }
    if (!m.nvlink.empty() && (m.nvlink[a] & ~GpuSet::FirstN(static_cast<int>(n)).bits()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kLinksWhat, "NVLink of GPU", a, " names GPUs outside the node's ", n));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* PcieLinkName(PcieLink link) {
  switch (link) {
    case PcieLink::kInternal: return "internal";
    case PcieLink::kSingleSwitch: return "PIX";
    case PcieLink::kMultipleSwitches: return "PXB";
    case PcieLink::kHostBridge: return "PHB";
    case PcieLink::kNumaNode: return "NODE";
    case PcieLink::kSystem: return "SYS";
  }
  return "SYS";
}

absl::StatusOr<GpuTopology> GpuTopology::FromLinkMatrix(const GpuLinkMatrix& links) {
  if (absl::Status s = CheckMatrix(links); !s.ok()) return s;
  const int n = static_cast<int>(links.pcie.size());
  Adjacency socket_adj{}, switch_adj{}, nvlink_adj{};
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const PcieLink link = links.pcie[a][b];
      if (link < PcieLink::kSystem) socket_adj[a] |= uint64_t{1} << b;
      if (link <= PcieLink::kSingleSwitch) switch_adj[a] |= uint64_t{1} << b;
    }
    if (!links.nvlink.empty()) nvlink_adj[a] = links.nvlink[a] & ~(uint64_t{1} << a);
  }
  absl::StatusOr<GpuTopology> t = FromGroups({.gpu_count = n,
                                              .switches = Components(switch_adj, n),
                                              .sockets = Components(socket_adj, n),
                                              .nvlink_islands = Cliques(nvlink_adj, n)});
  // Components of nested relations always nest; an error here is a bug.
  if (!t.ok()) return absl::InternalError(absl::StrCat(kLinksWhat, t.status().message()));
  return t;
}

}  // namespace trainyard::core
