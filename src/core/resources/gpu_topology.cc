// GpuTopology: the compact spec ("switches=0-1,2-3;sockets=0-3"), its
// canonical printing, and the validation every topology goes through (Build).
// The nvidia-smi parser lives in gpu_topology_nvidia_smi.cc.
#include "core/resources/gpu_topology.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace trainyard::core {
namespace {

constexpr char kKeys[] = "gpus, switches, sockets, nvlink";

// "0-1+4-5" for {0,1,4,5}: a group as the spec writes it.
std::string GroupText(GpuSet group) {
  return absl::StrReplaceAll(group.ToString(), {{",", "+"}});
}

std::string GroupsText(const std::vector<GpuSet>& groups) {
  return absl::StrJoin(groups, ",", [](std::string* out, GpuSet g) {
    out->append(GroupText(g));
  });
}

void SortByLowest(std::vector<GpuSet>* groups) {
  std::sort(groups->begin(), groups->end(),
            [](GpuSet a, GpuSet b) { return a.Lowest() < b.Lowest(); });
}

// Checks that `groups` are non-empty, inside the node and pairwise disjoint;
// with `cover`, that together they hold every GPU.
absl::Status CheckPartition(absl::string_view what, absl::string_view key,
                            const std::vector<GpuSet>& groups, GpuSet all, bool cover) {
  GpuSet seen;
  for (GpuSet g : groups) {
    if (g.Empty()) return absl::InvalidArgumentError(absl::StrCat(what, key, ": empty group"));
    if (!all.ContainsAll(g)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, key, ": group '", GroupText(g), "' has GPUs outside the node's ",
          all.Count(), " GPUs (", (g - all).ToString(), ")"));
    }
    GpuSet twice = seen & g;
    if (!twice.Empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, key, ": GPU ", twice.Lowest(),
                                                     " is in more than one group"));
    }
    seen = seen | g;
  }
  if (cover && seen != all) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, key, ": GPUs ", (all - seen).ToString(), " are in no group"));
  }
  return absl::OkStatus();
}

// Parses "0-1,2-3" (groups joined by "+" inside) into groups.
absl::StatusOr<std::vector<GpuSet>> ParseGroups(absl::string_view key, absl::string_view value) {
  std::vector<GpuSet> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology spec: ", key, ": empty group in '", value, "'"));
    }
    std::string joined = absl::StrReplaceAll(part, {{"+", ","}});
    absl::StatusOr<GpuSet> group = GpuSet::Parse(joined);
    if (!group.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("topology spec: ", key, ": group '", part,
                                                     "': ", group.status().message()));
    }
    out.push_back(*group);
  }
  return out;
}

struct SpecParts {
  std::optional<int> gpus;
  std::optional<std::vector<GpuSet>> switches, sockets, nvlink;
};

absl::Status ParseSpecEntry(absl::string_view entry, SpecParts* parts) {
  std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
  if (kv.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("topology spec: '", entry,
                                                   "' is not key=value (keys: ", kKeys, ")"));
  }
  std::string key(absl::StripAsciiWhitespace(kv[0]));
  absl::string_view value = absl::StripAsciiWhitespace(kv[1]);
  auto duplicate = [&] {
    return absl::InvalidArgumentError(absl::StrCat("topology spec: '", key, "' given twice"));
  };
  if (key == "gpus") {
    if (parts->gpus) return duplicate();
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology spec: gpus: '", value, "' is not a GPU count"));
    }
    if (n > kMaxGpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology spec: gpus: ", n, " is above the maximum ", kMaxGpus));
    }
    parts->gpus = n;
    return absl::OkStatus();
  }
  std::optional<std::vector<GpuSet>>* slot = key == "switches"  ? &parts->switches
                                             : key == "sockets" ? &parts->sockets
                                             : key == "nvlink"  ? &parts->nvlink
                                                                : nullptr;
  if (slot == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology spec: unknown key '", key, "' (keys: ", kKeys, ")"));
  }
  if (slot->has_value()) return duplicate();
  absl::StatusOr<std::vector<GpuSet>> groups = ParseGroups(key, value);
  if (!groups.ok()) return groups.status();
  *slot = std::move(*groups);
  return absl::OkStatus();
}

// The GPU count implied by the groups: one past the highest GPU named.
int ImpliedGpuCount(const SpecParts& parts) {
  GpuSet all;
  for (const auto* groups : {&parts.switches, &parts.sockets, &parts.nvlink}) {
    if (!groups->has_value()) continue;
    for (GpuSet g : **groups) all = all | g;
  }
  return all.Empty() ? 0 : 64 - __builtin_clzll(all.bits());
}

}  // namespace

GpuTopology GpuTopology::Flat(int gpu_count) {
  gpu_count = std::clamp(gpu_count, 0, kMaxGpus);
  std::vector<GpuSet> one;
  if (gpu_count > 0) one.push_back(GpuSet::FirstN(gpu_count));
  return *Build(gpu_count, one, one, {}, "flat topology: ");
}

absl::StatusOr<GpuTopology> GpuTopology::FromSpec(std::string_view spec_in) {
  absl::string_view spec(spec_in.data(), spec_in.size());
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError(
        "topology spec is empty; write e.g. gpus=8 or switches=0-1,2-3;sockets=0-3");
  }
  SpecParts parts;
  for (absl::string_view entry : absl::StrSplit(spec, ';')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) continue;
    absl::Status s = ParseSpecEntry(entry, &parts);
    if (!s.ok()) return s;
  }
  if (!parts.gpus && !parts.switches && !parts.sockets) {
    return absl::InvalidArgumentError(
        "topology spec: give gpus=N or switches= / sockets= groups");
  }
  int n = parts.gpus ? *parts.gpus : ImpliedGpuCount(parts);
  std::vector<GpuSet> switches, sockets;
  if (parts.switches) {
    switches = *parts.switches;
  } else {
    for (int i = 0; i < n; ++i) switches.push_back(GpuSet(uint64_t{1} << i));
  }
  if (parts.sockets) {
    sockets = *parts.sockets;
  } else if (n > 0) {
    sockets.push_back(GpuSet::FirstN(n));
  }
  return Build(n, std::move(switches), std::move(sockets),
               parts.nvlink ? *parts.nvlink : std::vector<GpuSet>(), "topology spec: ");
}

absl::StatusOr<GpuTopology> GpuTopology::Build(int gpu_count, std::vector<GpuSet> switches,
                                               std::vector<GpuSet> sockets,
                                               std::vector<GpuSet> islands,
                                               std::string_view what_in) {
  absl::string_view what(what_in.data(), what_in.size());
  GpuSet all = GpuSet::FirstN(gpu_count);
  for (auto [key, groups, cover] : {std::tuple{"switches", &switches, true},
                                    std::tuple{"sockets", &sockets, true},
                                    std::tuple{"nvlink", &islands, false}}) {
    absl::Status s = CheckPartition(what, key, *groups, all, cover);
    if (!s.ok()) return s;
    SortByLowest(groups);
  }
  GpuTopology t;
  t.gpu_count_ = gpu_count;
  for (size_t k = 0; k < sockets.size(); ++k) {
    for (int g : sockets[k].Indices()) t.gpu_socket_[g] = static_cast<uint8_t>(k);
  }
  for (size_t s = 0; s < switches.size(); ++s) {
    int socket = t.gpu_socket_[switches[s].Lowest()];
    if (!sockets[socket].ContainsAll(switches[s])) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "switches: group '", GroupText(switches[s]), "' spans more than one socket"));
    }
    t.switch_socket_[s] = static_cast<uint8_t>(socket);
    for (int g : switches[s].Indices()) t.gpu_switch_[g] = static_cast<uint8_t>(s);
  }
  t.switches_ = std::move(switches);
  t.sockets_ = std::move(sockets);
  t.nvlink_islands_ = std::move(islands);
  return t;
}

std::string GpuTopology::ToSpec() const {
  std::string out = absl::StrCat("gpus=", gpu_count_);
  if (gpu_count_ == 0) return out;
  absl::StrAppend(&out, ";switches=", GroupsText(switches_), ";sockets=", GroupsText(sockets_));
  if (!nvlink_islands_.empty()) absl::StrAppend(&out, ";nvlink=", GroupsText(nvlink_islands_));
  return out;
}

}  // namespace trainyard::core
