// GpuTopology::FromNvidiaSmiTopo: reads the matrix that `nvidia-smi topo -m`
// prints into pairwise links (gpu_topology.h states the rules) and builds
// the topology from them with FromLinkMatrix, as NVML discovery does.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::core {
namespace {

constexpr char kSmiWhat[] = "nvidia-smi topo: ";

// The parsed table: one row of cells per GPU, one column per device.
struct TopoTable {
  int gpu_count = 0;
  std::vector<std::string> columns;
  bool has_cpu_affinity = false;
  bool has_numa_affinity = false;
  std::vector<std::vector<std::string>> cells;  // [gpu][column]
  std::vector<std::string> cpu_affinity;        // [gpu], "" when not printed
  std::vector<std::string> numa_affinity;       // [gpu], "" when not printed
};

// Removes terminal escape sequences (newer nvidia-smi underlines the header).
std::string StripEscapes(absl::string_view line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !absl::ascii_isalpha(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    out.push_back(line[i]);
  }
  return out;
}

std::vector<std::string> Tokens(absl::string_view line) {
  return absl::StrSplit(StripEscapes(line), absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
}

bool IsNvLink(absl::string_view cell) {
  int n = 0;
  return absl::StartsWith(cell, "NV") && absl::SimpleAtoi(cell.substr(2), &n) && n > 0;
}

bool IsLinkType(absl::string_view cell) {
  return cell == "X" || cell == "PIX" || cell == "PXB" || cell == "PHB" || cell == "NODE" ||
         cell == "SYS" || cell == "SOC" || IsNvLink(cell);
}

absl::Status ParseHeader(const std::vector<std::string>& tokens, TopoTable* t) {
  bool in_devices = true;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool next_is_affinity = i + 1 < tokens.size() && tokens[i + 1] == "Affinity";
    if (tokens[i] == "CPU" && next_is_affinity) t->has_cpu_affinity = true;
    if (tokens[i] == "NUMA" && next_is_affinity) t->has_numa_affinity = true;
    // Device columns end where the multi-word affinity headers begin.
    if (tokens[i] == "CPU" || tokens[i] == "NUMA" || tokens[i] == "GPU") in_devices = false;
    if (in_devices) t->columns.push_back(tokens[i]);
  }
  while (t->gpu_count < static_cast<int>(t->columns.size()) &&
         t->columns[t->gpu_count] == absl::StrCat("GPU", t->gpu_count)) {
    ++t->gpu_count;
  }
  for (size_t c = t->gpu_count; c < t->columns.size(); ++c) {
    if (absl::StartsWith(t->columns[c], "GPU")) {
      return absl::InvalidArgumentError(absl::StrCat(kSmiWhat, "header column ", c + 1, " is '",
                                                     t->columns[c], "', expected 'GPU", c, "'"));
    }
  }
  if (t->gpu_count > kMaxGpus) {
    return absl::InvalidArgumentError(absl::StrCat(kSmiWhat, "the header names ", t->gpu_count,
                                                   " GPUs; a node has at most ", kMaxGpus));
  }
  t->cells.resize(t->gpu_count);
  t->cpu_affinity.resize(t->gpu_count);
  t->numa_affinity.resize(t->gpu_count);
  return absl::OkStatus();
}

absl::Status ParseGpuRow(int line_no, int gpu, const std::vector<std::string>& tokens,
                         TopoTable* t) {
  const size_t devices = t->columns.size();
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(kSmiWhat, "line ", line_no, " (GPU", gpu,
                                                   "): ", why));
  };
  if (!t->cells[gpu].empty()) return error("a second row for this GPU");
  if (tokens.size() < devices + 1) {
    return error(absl::StrCat("has ", tokens.size() - 1, " cells; the header has ", devices,
                              " devices"));
  }
  for (size_t c = 0; c < devices; ++c) {
    const std::string& cell = tokens[c + 1];
    if (!IsLinkType(cell)) {
      return error(absl::StrCat("cell '", cell, "' in column ", t->columns[c],
                                " is not a link type (X, NV#, PIX, PXB, PHB, NODE, SYS, SOC)"));
    }
    if ((cell == "X") != (static_cast<int>(c) == gpu)) {
      return error(absl::StrCat("cell '", cell, "' in column ", t->columns[c],
                                " is wrong: X marks the GPU's own column only"));
    }
  }
  t->cells[gpu].assign(tokens.begin() + 1, tokens.begin() + 1 + devices);
  size_t rest = devices + 1;
  if (t->has_cpu_affinity && rest < tokens.size()) t->cpu_affinity[gpu] = tokens[rest++];
  if (t->has_numa_affinity && rest < tokens.size()) t->numa_affinity[gpu] = tokens[rest];
  return absl::OkStatus();
}

absl::StatusOr<TopoTable> ParseTable(absl::string_view text) {
  TopoTable t;
  bool header_seen = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::vector<std::string> tokens = Tokens(line);
    if (tokens.empty()) continue;
    if (!header_seen) {
      if (tokens[0] != "GPU0" || (tokens.size() > 1 && tokens[1] == "X")) continue;
      header_seen = true;
      absl::Status s = ParseHeader(tokens, &t);
      if (!s.ok()) return s;
      continue;
    }
    if (tokens[0] == "Legend:") break;
    int gpu = -1;
    if (!absl::StartsWith(tokens[0], "GPU") || !absl::SimpleAtoi(tokens[0].substr(3), &gpu) ||
        gpu < 0 || gpu >= t.gpu_count) {
      continue;  // a NIC row or other text
    }
    absl::Status s = ParseGpuRow(line_no, gpu, tokens, &t);
    if (!s.ok()) return s;
  }
  if (!header_seen) {
    return absl::InvalidArgumentError(absl::StrCat(
        kSmiWhat, "no header line starting with GPU0; is this the output of `nvidia-smi topo -m`?"));
  }
  for (int g = 0; g < t.gpu_count; ++g) {
    if (t.cells[g].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(kSmiWhat, "no row for GPU", g));
    }
  }
  return t;
}

// The key two GPUs of one socket share: NUMA node when printed as a number,
// else the CPU affinity list, else nothing (no constraint).
std::string AffinityKey(const TopoTable& t, int gpu) {
  int numa = 0;
  if (absl::SimpleAtoi(t.numa_affinity[gpu], &numa)) return absl::StrCat("numa:", numa);
  if (!t.cpu_affinity[gpu].empty() && t.cpu_affinity[gpu] != "N/A") {
    return absl::StrCat("cpu:", t.cpu_affinity[gpu]);
  }
  return "";
}

// True when GPUs a and b reach every NIC the same way, and some NIC through
// at most PCIe switches (PIX / PXB): they sit under the same switch.
bool SameNicRows(const TopoTable& t, int a, int b) {
  bool near_nic = false;
  for (size_t c = t.gpu_count; c < t.columns.size(); ++c) {
    if (t.cells[a][c] != t.cells[b][c]) return false;
    near_nic |= t.cells[a][c] == "PIX" || t.cells[a][c] == "PXB";
  }
  return near_nic;
}

// The PCIe link of GPUs a and b as the table shows it: across sockets when
// their affinities differ; where NV# hides the PCIe path, one switch when
// they reach the NICs alike, else one NUMA node.
PcieLink LinkOf(const TopoTable& t, int a, int b) {
  const std::string& cell = t.cells[a][b];
  if (cell == "SYS" || cell == "SOC" || AffinityKey(t, a) != AffinityKey(t, b)) {
    return PcieLink::kSystem;
  }
  if (cell == "PIX") return PcieLink::kSingleSwitch;
  if (cell == "PXB") return PcieLink::kMultipleSwitches;
  if (cell == "PHB") return PcieLink::kHostBridge;
  if (IsNvLink(cell)) return SameNicRows(t, a, b) ? PcieLink::kSingleSwitch : PcieLink::kNumaNode;
  return PcieLink::kNumaNode;  // NODE
}

GpuLinkMatrix LinksOf(const TopoTable& t) {
  const int n = t.gpu_count;
  GpuLinkMatrix m{.pcie = std::vector<std::vector<PcieLink>>(
                      n, std::vector<PcieLink>(n, PcieLink::kInternal)),
                  .nvlink = std::vector<uint64_t>(n, 0)};
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      m.pcie[a][b] = LinkOf(t, a, b);
      if (IsNvLink(t.cells[a][b])) m.nvlink[a] |= uint64_t{1} << b;
    }
  }
  return m;
}

}  // namespace

absl::StatusOr<GpuTopology> GpuTopology::FromNvidiaSmiTopo(std::string_view text_in) {
  absl::StatusOr<TopoTable> table = ParseTable(absl::string_view(text_in.data(), text_in.size()));
  if (!table.ok()) return table.status();
  absl::StatusOr<GpuTopology> t = FromLinkMatrix(LinksOf(*table));
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(kSmiWhat, t.status().message()));
  return t;
}

}  // namespace trainyard::core
