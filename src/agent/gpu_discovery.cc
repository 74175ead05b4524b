// nvidia-smi parsing, simulated GPUs, ownerless-GPU exclusion and the choice
// between discovery methods. NVML lives in nvml_discovery.cc, the process
// runner in command_runner.cc.
#include "agent/gpu_discovery.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/nvml_discovery.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kDiscoveryLog[] = "gpu-discovery";

// Column positions of the fields we read; -1 when absent.
struct QueryColumns {
  int index = -1, uuid = -1, name = -1, used = -1, total = -1, utilization = -1, pci = -1;
};

QueryColumns ColumnsOfHeader(absl::string_view header) {
  QueryColumns c;
  int i = 0;
  for (absl::string_view field : absl::StrSplit(header, ',')) {
    absl::string_view f = absl::StripAsciiWhitespace(field);
    if (absl::StartsWith(f, "index")) c.index = i;
    if (absl::StartsWith(f, "uuid")) c.uuid = i;
    if (absl::StartsWith(f, "name")) c.name = i;
    if (absl::StartsWith(f, "memory.used")) c.used = i;
    if (absl::StartsWith(f, "memory.total")) c.total = i;
    if (absl::StartsWith(f, "utilization.gpu")) c.utilization = i;
    if (absl::StartsWith(f, "pci.bus_id")) c.pci = i;
    ++i;
  }
  return c;
}

// "81920 MiB" → 81920; "[N/A]" → 0 (e.g. a MIG-enabled GPU reports N/A).
bool ParseMib(absl::string_view text, int64_t* mb) {
  text = absl::StripAsciiWhitespace(text);
  if (absl::StartsWith(text, "[N/A]") || text == "N/A") {
    *mb = 0;
    return true;
  }
  absl::ConsumeSuffix(&text, "MiB");
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), mb) && *mb >= 0;
}

absl::StatusOr<GpuInfo> ParseQueryRow(absl::string_view line, int line_no, const QueryColumns& c) {
  std::vector<std::string> fields = absl::StrSplit(line, ',');
  for (std::string& f : fields) absl::StripAsciiWhitespace(&f);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("nvidia-smi query line ", line_no, " \"", line, "\": ", what));
  };
  int width = std::max({c.index, c.uuid, c.name, c.used, c.total}) + 1;
  if (static_cast<int>(fields.size()) < width) {
    return bad(absl::StrCat("expected ", width, " comma-separated fields"));
  }
  GpuInfo gpu;
  if (!absl::SimpleAtoi(fields[c.index], &gpu.index) || gpu.index < 0 ||
      gpu.index >= core::kMaxGpus) {
    return bad("index is not a number 0..63");
  }
  if (!ParseMib(fields[c.total], &gpu.memory_total_mb)) return bad("memory.total is not \"N MiB\"");
  if (c.used >= 0 && !ParseMib(fields[c.used], &gpu.memory_used_mb)) {
    return bad("memory.used is not \"N MiB\"");
  }
  if (c.utilization >= 0 && static_cast<int>(fields.size()) > c.utilization) {
    // "45 %"; "[N/A]" (or anything else) stays unknown.
    absl::string_view u = fields[c.utilization];
    absl::ConsumeSuffix(&u, "%");
    int percent = -1;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(u), &percent) && percent >= 0 && percent <= 100) {
      gpu.utilization_percent = percent;
    }
  }
  if (c.uuid >= 0) gpu.uuid = fields[c.uuid];
  if (c.pci >= 0 && static_cast<int>(fields.size()) > c.pci) gpu.pci_bus_id = fields[c.pci];
  if (c.name >= 0) gpu.model = fields[c.name];
  return gpu;
}

// Checks that the GPUs are exactly 0..n-1 after sorting.
absl::Status CheckDenseIndices(std::vector<GpuInfo>& gpus) {
  std::sort(gpus.begin(), gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].index != static_cast<int>(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPU indices must be 0..", gpus.size() - 1, " without gaps or repeats; found index ",
          gpus[i].index, " at position ", i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

core::GpuSet OwnerlessBusyGpus(const std::vector<GpuInfo>& gpus, core::GpuSet ours,
                               const OwnerlessGpuOptions& options) {
  core::GpuSet busy;
  if (!options.enable) return busy;
  for (const GpuInfo& gpu : gpus) {
    if (gpu.memory_used_mb > options.not_ready_memory_threshold_mb && !ours.Contains(gpu.index)) {
      busy = busy | core::GpuSet(uint64_t{1} << gpu.index);
    }
  }
  return busy;
}

void RecordedCommandRunner::Add(const std::string& argv_joined, std::string output) {
  outputs_[argv_joined] = std::move(output);
}

absl::StatusOr<std::string> RecordedCommandRunner::Run(const std::vector<std::string>& argv) {
  std::string joined = absl::StrJoin(argv, " ");
  auto it = outputs_.find(joined);
  if (it == outputs_.end()) return absl::NotFoundError(absl::StrCat("no recorded output for \"", joined, "\""));
  return it->second;
}

std::vector<std::string> NvidiaSmiQueryCommand() {
  return {"nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,pci.bus_id", "--format=csv"};
}

std::vector<std::string> NvidiaSmiTopoCommand() { return {"nvidia-smi", "topo", "-m"}; }

absl::StatusOr<std::vector<GpuInfo>> ParseNvidiaSmiQuery(absl::string_view csv) {
  std::vector<GpuInfo> gpus;
  QueryColumns columns;
  bool have_header = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(csv, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!have_header) {
      columns = ColumnsOfHeader(line);
      if (columns.index < 0 || columns.total < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "nvidia-smi query line ", line_no, " \"", line,
            "\": header must name the columns index and memory.total"));
      }
      have_header = true;
      continue;
    }
    absl::StatusOr<GpuInfo> gpu = ParseQueryRow(line, line_no, columns);
    if (!gpu.ok()) return gpu.status();
    gpus.push_back(*std::move(gpu));
  }
  if (!have_header) return absl::InvalidArgumentError("nvidia-smi query output is empty");
  absl::Status dense = CheckDenseIndices(gpus);
  if (!dense.ok()) return dense;
  return gpus;
}

absl::StatusOr<GpuInventory> NvidiaSmiGpuDiscovery::Discover() {
  absl::StatusOr<std::string> query = runner_->Run(NvidiaSmiQueryCommand());
  if (!query.ok()) return query.status();
  absl::StatusOr<std::vector<GpuInfo>> gpus = ParseNvidiaSmiQuery(*query);
  if (!gpus.ok()) return gpus.status();
  GpuInventory inventory{.gpus = *std::move(gpus), .source = "nvidia-smi"};
  int count = static_cast<int>(inventory.gpus.size());
  if (topology_ && topology_->gpu_count() == count) {
    inventory.topology = *topology_;
    return inventory;
  }
  absl::StatusOr<std::string> topo = runner_->Run(NvidiaSmiTopoCommand());
  absl::StatusOr<core::GpuTopology> topology =
      topo.ok() ? core::GpuTopology::FromNvidiaSmiTopo(*topo) : topo.status();
  if (topology.ok() && topology->gpu_count() == count) {
    inventory.topology = *std::move(topology);
    topology_ = inventory.topology;
  } else {
    // Placement still works without topology; say why it is missing.
    Log(LogLevel::kWarning, kDiscoveryLog, "no GPU topology from nvidia-smi topo -m (%s); using flat",
        topology.ok() ? absl::StrCat("it lists ", topology->gpu_count(), " GPUs, the query ", count)
                      : std::string(topology.status().message()));
    inventory.topology = core::GpuTopology::Flat(count);  // tried again next time
  }
  return inventory;
}

SimulatedGpuDiscovery::SimulatedGpuDiscovery(core::GpuTopology topology, int64_t memory_total_mb,
                                             std::string model)
    : topology_(std::move(topology)),
      memory_total_mb_(memory_total_mb),
      model_(std::move(model)),
      used_mb_(topology_.gpu_count(), 0) {}

absl::StatusOr<GpuInventory> SimulatedGpuDiscovery::Discover() {
  GpuInventory inventory{.topology = topology_, .source = "simulated"};
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < topology_.gpu_count(); ++i) {
    inventory.gpus.push_back({.index = i,
                              .memory_used_mb = used_mb_[i],
                              .memory_total_mb = memory_total_mb_,
                              .uuid = absl::StrCat("GPU-simulated-", i),
                              .model = model_,
                              .pci_bus_id = absl::StrFormat("00000000:%02X:00.0", i + 1)});
  }
  return inventory;
}

absl::Status SimulatedGpuDiscovery::SetMemoryUsed(int index, int64_t used_mb) {
  if (index < 0 || index >= topology_.gpu_count()) {
    return absl::InvalidArgumentError(absl::StrCat("GPU index ", index, " is outside 0..",
                                                   topology_.gpu_count() - 1));
  }
  absl::MutexLock lock(&mu_);
  used_mb_[index] = used_mb;
  return absl::OkStatus();
}

absl::StatusOr<GpuDiscoveryPtr> NewSimulatedDiscovery(const GpuDiscoveryOptions& options) {
  if (options.gpu_topology.empty()) {
    if (options.simulate_gpus < 0 || options.simulate_gpus > core::kMaxGpus) {
      return absl::InvalidArgumentError(absl::StrCat("--simulate-gpus ", options.simulate_gpus,
                                                     " is outside 0..", core::kMaxGpus));
    }
    return std::make_unique<SimulatedGpuDiscovery>(core::GpuTopology::Flat(options.simulate_gpus),
                                                   options.simulated_memory_mb, options.simulated_model);
  }
  absl::StatusOr<core::GpuTopology> topology = core::GpuTopology::FromSpec(options.gpu_topology);
  if (!topology.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu-topology \"", options.gpu_topology, "\": ", topology.status().message()));
  }
  if (options.simulate_gpus >= 0 && topology->gpu_count() != options.simulate_gpus) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu-topology \"", options.gpu_topology, "\" describes ", topology->gpu_count(),
        " GPUs but --simulate-gpus is ", options.simulate_gpus));
  }
  return std::make_unique<SimulatedGpuDiscovery>(*std::move(topology), options.simulated_memory_mb,
                                                 options.simulated_model);
}

absl::StatusOr<GpuDiscoveryPtr> ChooseGpuDiscovery(const GpuDiscoveryOptions& options) {
  if (options.simulate_gpus >= 0 || !options.gpu_topology.empty()) {
    return NewSimulatedDiscovery(options);
  }
  absl::StatusOr<GpuDiscoveryPtr> nvml = NvmlGpuDiscovery::Open(options.nvml_library);
  if (nvml.ok()) return nvml;
  Log(LogLevel::kInfo, kDiscoveryLog, "NVML not used: %s", nvml.status().message());
  auto smi = options.runner != nullptr
                 ? std::make_unique<NvidiaSmiGpuDiscovery>(options.runner)
                 : std::make_unique<NvidiaSmiGpuDiscovery>(NewSubprocessRunner());
  absl::StatusOr<GpuInventory> probe = smi->Discover();
  if (probe.ok()) return GpuDiscoveryPtr(std::move(smi));
  Log(LogLevel::kInfo, kDiscoveryLog, "nvidia-smi not used: %s; this node has no GPUs",
      probe.status().message());
  return std::make_unique<SimulatedGpuDiscovery>(core::GpuTopology::Flat(0), 0);
}

}  // namespace trainyard::agent
