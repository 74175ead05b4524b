// Small helpers of the simulator's input values; see trace.h.
#include "sim/trace.h"

#include "absl/strings/str_cat.h"

namespace trainyard::sim {

int JobSpec::TaskCount() const {
  int n = 0;
  for (const RoleSpec& r : roles) n += r.count;
  return n;
}

int64_t JobSpec::GpuCount() const {
  int64_t n = 0;
  for (const RoleSpec& r : roles) n += static_cast<int64_t>(r.count) * r.gpus;
  return n;
}

namespace {

std::string Range(int first, int last) {
  return first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last);
}

}  // namespace

std::string DefaultTopologySpec(int gpus) {
  if (gpus <= 0) return "gpus=0";
  std::vector<std::pair<int, int>> switches;
  for (int g = 0; g < gpus; g += 2) switches.push_back({g, std::min(g + 1, gpus - 1)});
  std::string spec = "switches=";
  for (size_t i = 0; i < switches.size(); ++i) {
    absl::StrAppend(&spec, i ? "," : "", Range(switches[i].first, switches[i].second));
  }
  if (gpus < 4) return absl::StrCat(spec, ";sockets=", Range(0, gpus - 1));
  size_t first_half = (switches.size() + 1) / 2;
  int split = switches[first_half - 1].second;
  return absl::StrCat(spec, ";sockets=", Range(0, split), ",", Range(split + 1, gpus - 1));
}

}  // namespace trainyard::sim
