// GpuTopology::FromGroups — the one constructor every topology goes through,
// and the validation that keeps placement's invariants (each GPU in one
// switch and one socket, each switch inside one socket) — with the canonical
// spec printing. The spec parser is in gpu_topology_spec.cc, the link matrix
// in gpu_topology_links.cc, nvidia-smi in gpu_topology_nvidia_smi.cc.
#include "core/resources/gpu_topology.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace trainyard::core {
namespace {

// "0-1+4" for {0,1,4}: a group as the spec writes it.
std::string GroupText(GpuSet group) {
  return absl::StrReplaceAll(group.ToString(), {{",", "+"}});
}

std::string GroupsText(const std::vector<GpuSet>& groups) {
  return absl::StrJoin(groups, ",", [](std::string* out, GpuSet g) {
    out->append(GroupText(g));
  });
}

// "switches[2] '0+2'": a group named by its level and input position.
std::string GroupName(absl::string_view level, size_t i, GpuSet group) {
  return absl::StrCat(level, "[", i, "] '", GroupText(group), "'");
}

// Checks that the groups of one level are non-empty, inside the node and
// pairwise disjoint; with `cover`, that together they hold every GPU.
absl::Status CheckLevel(absl::string_view level, const std::vector<GpuSet>& groups, int gpu_count,
                        bool cover) {
  const GpuSet all = GpuSet::FirstN(gpu_count);
  GpuSet seen;
  for (size_t i = 0; i < groups.size(); ++i) {
    const GpuSet g = groups[i];
    if (g.Empty()) return absl::InvalidArgumentError(absl::StrCat(level, "[", i, "]: empty group"));
    if (!all.ContainsAll(g)) {
      return absl::InvalidArgumentError(
          absl::StrCat(GroupName(level, i, g), ": has GPUs outside the node's ", gpu_count,
                       " GPUs (", (g - all).ToString(), ")"));
    }
    if (GpuSet twice = seen & g; !twice.Empty()) {
      size_t first = 0;
      while (!groups[first].Contains(twice.Lowest())) ++first;
      return absl::InvalidArgumentError(absl::StrCat(GroupName(level, i, g), ": GPU ",
                                                     twice.Lowest(), " is also in ",
                                                     GroupName(level, first, groups[first])));
    }
    seen = seen | g;
  }
  if (cover && seen != all) {
    return absl::InvalidArgumentError(
        absl::StrCat(level, ": GPUs ", (all - seen).ToString(), " are in no group"));
  }
  return absl::OkStatus();
}

// Checks that each switch sits inside one socket. REQUIRES: both levels
// passed CheckLevel with cover.
absl::Status CheckSwitchesInSockets(const GpuGroups& g) {
  for (size_t s = 0; s < g.switches.size(); ++s) {
    for (size_t k = 0; k < g.sockets.size(); ++k) {
      const GpuSet in = g.switches[s] & g.sockets[k];
      if (in.Empty() || in == g.switches[s]) continue;
      size_t other = 0;
      while (other == k || (g.switches[s] & g.sockets[other]).Empty()) ++other;
      return absl::InvalidArgumentError(absl::StrCat(
          GroupName("switches", s, g.switches[s]), ": spans ", GroupName("sockets", k, g.sockets[k]),
          " and ", GroupName("sockets", other, g.sockets[other]),
          "; a switch must sit inside one socket"));
    }
  }
  return absl::OkStatus();
}

void SortByLowest(std::vector<GpuSet>* groups) {
  std::sort(groups->begin(), groups->end(),
            [](GpuSet a, GpuSet b) { return a.Lowest() < b.Lowest(); });
}

// Fills the spec's defaults for levels given no groups at all.
void FillDefaults(GpuGroups* g) {
  if (g->gpu_count == 0) return;
  if (g->switches.empty()) {
    for (int i = 0; i < g->gpu_count; ++i) g->switches.push_back(GpuSet(uint64_t{1} << i));
  }
  if (g->sockets.empty()) g->sockets.push_back(GpuSet::FirstN(g->gpu_count));
}

}  // namespace

absl::StatusOr<GpuTopology> GpuTopology::FromGroups(GpuGroups g) {
  if (g.gpu_count < 0 || g.gpu_count > kMaxGpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_count: ", g.gpu_count, " is outside 0..", kMaxGpus));
  }
  FillDefaults(&g);
  for (auto [level, groups, cover] : {std::tuple{"switches", &g.switches, true},
                                      std::tuple{"sockets", &g.sockets, true},
                                      std::tuple{"nvlink_islands", &g.nvlink_islands, false}}) {
    if (absl::Status s = CheckLevel(level, *groups, g.gpu_count, cover); !s.ok()) return s;
  }
  if (absl::Status s = CheckSwitchesInSockets(g); !s.ok()) return s;
  // Errors above name groups by input position; sorting comes after.
  for (auto* groups : {&g.switches, &g.sockets, &g.nvlink_islands}) SortByLowest(groups);
  GpuTopology t;
  t.gpu_count_ = g.gpu_count;
  for (size_t k = 0; k < g.sockets.size(); ++k) {
    for (int gpu : g.sockets[k].Indices()) t.gpu_socket_[gpu] = static_cast<uint8_t>(k);
  }
  for (size_t s = 0; s < g.switches.size(); ++s) {
    t.switch_socket_[s] = t.gpu_socket_[g.switches[s].Lowest()];
    for (int gpu : g.switches[s].Indices()) t.gpu_switch_[gpu] = static_cast<uint8_t>(s);
  }
  t.switches_ = std::move(g.switches);
  t.sockets_ = std::move(g.sockets);
  t.nvlink_islands_ = std::move(g.nvlink_islands);
  return t;
}

GpuTopology GpuTopology::Flat(int gpu_count) {
  GpuGroups g{.gpu_count = std::clamp(gpu_count, 0, kMaxGpus)};
  if (g.gpu_count > 0) g.switches.push_back(GpuSet::FirstN(g.gpu_count));
  return *FromGroups(std::move(g));  // one switch in one socket is always valid
}

GpuGroups GpuTopology::groups() const {
  return {.gpu_count = gpu_count_,
          .switches = switches_,
          .sockets = sockets_,
          .nvlink_islands = nvlink_islands_};
}

std::string GpuTopology::ToSpec() const {
  std::string out = absl::StrCat("gpus=", gpu_count_);
  if (gpu_count_ == 0) return out;
  absl::StrAppend(&out, ";switches=", GroupsText(switches_), ";sockets=", GroupsText(sockets_));
  if (!nvlink_islands_.empty()) absl::StrAppend(&out, ";nvlink=", GroupsText(nvlink_islands_));
  return out;
}

}  // namespace trainyard::core
