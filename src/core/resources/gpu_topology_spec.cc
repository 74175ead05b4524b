// GpuTopology::FromSpec: the compact spec ("switches=0-1,2-3;sockets=0-3")
// read into group bitmaps and built through FromGroups.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::core {
namespace {

constexpr char kSpecWhat[] = "topology spec: ";
constexpr char kKeys[] = "gpus, switches, sockets, nvlink";

// Parses "0-1,2-3" (ranges joined by "+" inside a group) into groups.
absl::StatusOr<std::vector<GpuSet>> ParseGroups(absl::string_view key, absl::string_view value) {
  std::vector<GpuSet> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kSpecWhat, key, ": empty group in '", value, "'"));
    }
    std::string joined = absl::StrReplaceAll(part, {{"+", ","}});
    absl::StatusOr<GpuSet> group = GpuSet::Parse(joined);
    if (!group.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kSpecWhat, key, ": group '", part, "': ", group.status().message()));
    }
    out.push_back(*group);
  }
  return out;
}

struct SpecParts {
  std::optional<int> gpus;
  std::optional<std::vector<GpuSet>> switches, sockets, nvlink;
};

absl::Status ParseGpuCount(absl::string_view value, SpecParts* parts) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kSpecWhat, "gpus: '", value, "' is not a GPU count"));
  }
  if (n > kMaxGpus) {
    return absl::InvalidArgumentError(
        absl::StrCat(kSpecWhat, "gpus: ", n, " is above the maximum ", kMaxGpus));
  }
  parts->gpus = n;
  return absl::OkStatus();
}

absl::Status ParseSpecEntry(absl::string_view entry, SpecParts* parts) {
  std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
  if (kv.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(kSpecWhat, "'", entry, "' is not key=value (keys: ", kKeys, ")"));
  }
  std::string key(absl::StripAsciiWhitespace(kv[0]));
  absl::string_view value = absl::StripAsciiWhitespace(kv[1]);
  auto duplicate = [&] {
    return absl::InvalidArgumentError(absl::StrCat(kSpecWhat, "'", key, "' given twice"));
  };
  if (key == "gpus") return parts->gpus ? duplicate() : ParseGpuCount(value, parts);
  std::optional<std::vector<GpuSet>>* slot = key == "switches"  ? &parts->switches
                                             : key == "sockets" ? &parts->sockets
                                             : key == "nvlink"  ? &parts->nvlink
                                                                : nullptr;
  if (slot == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kSpecWhat, "unknown key '", key, "' (keys: ", kKeys, ")"));
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
    if (absl::Status s = ParseSpecEntry(entry, &parts); !s.ok()) return s;
  }
  if (!parts.gpus && !parts.switches && !parts.sockets) {
    return absl::InvalidArgumentError(
        absl::StrCat(kSpecWhat, "give gpus=N or switches= / sockets= groups"));
  }
  GpuGroups groups{.gpu_count = parts.gpus ? *parts.gpus : ImpliedGpuCount(parts)};
  if (parts.switches) groups.switches = *std::move(parts.switches);
  if (parts.sockets) groups.sockets = *std::move(parts.sockets);
  if (parts.nvlink) groups.nvlink_islands = *std::move(parts.nvlink);
  absl::StatusOr<GpuTopology> t = FromGroups(std::move(groups));
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(kSpecWhat, t.status().message()));
  return t;
}

namespace {

std::string SpecRange(int first, int last) {
  return first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last);
}

}  // namespace

std::string DefaultTopologySpec(int gpus) {
  if (gpus <= 0) return "gpus=0";
  std::vector<std::pair<int, int>> switches;
  for (int g = 0; g < gpus; g += 2) switches.push_back({g, std::min(g + 1, gpus - 1)});
  std::string spec = "switches=";
  for (size_t i = 0; i < switches.size(); ++i) {
    absl::StrAppend(&spec, i ? "," : "", SpecRange(switches[i].first, switches[i].second));
  }
  if (gpus < 4) return absl::StrCat(spec, ";sockets=", SpecRange(0, gpus - 1));
  size_t first_half = (switches.size() + 1) / 2;
  int split = switches[first_half - 1].second;
  return absl::StrCat(spec, ";sockets=", SpecRange(0, split), ",", SpecRange(split + 1, gpus - 1));
}

}  // namespace trainyard::core
