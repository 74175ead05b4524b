// GPU discovery on one node: which GPUs it has, how much of their memory is
// used, how they are connected, and which of them are busy with processes
// Trainyard did not start. Implementations: NVML loaded at run time
// (nvml_discovery.h), `nvidia-smi` output, and simulated GPUs; ChooseGpuDiscovery
// tries them in that order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::agent {

// One GPU as the node sees it.
struct GpuInfo {
  int index = 0;
  int64_t memory_used_mb = 0;
  int64_t memory_total_mb = 0;
  std::string uuid;   // "" when unknown
  std::string model;  // "" when unknown
  // Time the GPU was busy over the driver's last sample period, 0..100;
  // -1 when unknown (simulated GPUs, an nvidia-smi or NVML without it).
  int utilization_percent = -1;
  // Its PCI address ("00000000:3B:00.0"; "" when unknown), which the
  // driver's Xid events name (gpu_health.h). Simulated GPU i: 0000:(i+1):00.0.
  std::string pci_bus_id;
};

// What one discovery pass finds.
struct GpuInventory {
  std::vector<GpuInfo> gpus;  // sorted by index, indices 0..n-1
  core::GpuTopology topology;
  std::string source;  // "nvml", "nvidia-smi" or "simulated"
};

// Finds the GPUs of this node. Discover() may be called again for each
// heartbeat (memory use changes); implementations are thread-compatible.
class GpuDiscovery {
 public:
  virtual ~GpuDiscovery() = default;
  // Returns the GPUs, their memory use and topology, or an error that says
  // what is missing (library, command, parse error with the line).
  virtual absl::StatusOr<GpuInventory> Discover() = 0;
  // "nvml", "nvidia-smi" or "simulated".
  virtual std::string Name() const = 0;
};
using GpuDiscoveryPtr = std::unique_ptr<GpuDiscovery>;

// The seed's `gpu_exclude_ownerless_gpu.enable` and
// `gpu_not_ready_memory_threshold_mb`.
struct OwnerlessGpuOptions {
  bool enable = false;
  int64_t not_ready_memory_threshold_mb = 20;
};

// Returns the GPUs to exclude: those whose used memory is above the threshold
// and that are not allocated to a task of ours (`ours`). Empty when disabled.
core::GpuSet OwnerlessBusyGpus(const std::vector<GpuInfo>& gpus, core::GpuSet ours,
                               const OwnerlessGpuOptions& options);

// Runs a command and returns its standard output. The seam that lets tests
// feed recorded `nvidia-smi` output.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Returns stdout of argv, or an error naming the command when it cannot be
  // started or exits non-zero (with the start of its stderr).
  virtual absl::StatusOr<std::string> Run(const std::vector<std::string>& argv) = 0;
};
using CommandRunnerPtr = std::unique_ptr<CommandRunner>;

// Runs real processes (fork/exec, looked up in PATH).
CommandRunnerPtr NewSubprocessRunner();

// Answers from recorded outputs keyed by the space-joined argv; an unknown
// command is NotFound, as a missing binary would be.
class RecordedCommandRunner : public CommandRunner {
 public:
  // Records `output` for the command line `argv_joined` ("nvidia-smi topo -m").
  void Add(const std::string& argv_joined, std::string output);
  absl::StatusOr<std::string> Run(const std::vector<std::string>& argv) override;

 private:
  absl::flat_hash_map<std::string, std::string> outputs_;
};

// The query the nvidia-smi discovery runs (argv).
std::vector<std::string> NvidiaSmiQueryCommand();
// The topology command (argv): nvidia-smi topo -m.
std::vector<std::string> NvidiaSmiTopoCommand();

// Parses `nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total
// --format=csv` output (columns found by their header names; index and
// memory.total are required). Errors name the line.
absl::StatusOr<std::vector<GpuInfo>> ParseNvidiaSmiQuery(absl::string_view csv);

// Discovery through the nvidia-smi command. The topology is read until it
// parses once, then kept; memory use is read on every call.
class NvidiaSmiGpuDiscovery : public GpuDiscovery {
 public:
  // REQUIRES: runner outlives this object.
  explicit NvidiaSmiGpuDiscovery(CommandRunner* runner) : runner_(runner) {}
  // Owns its runner.
  explicit NvidiaSmiGpuDiscovery(CommandRunnerPtr runner)
      : owned_runner_(std::move(runner)), runner_(owned_runner_.get()) {}
  absl::StatusOr<GpuInventory> Discover() override;
  std::string Name() const override { return "nvidia-smi"; }

 private:
  CommandRunnerPtr owned_runner_;
  CommandRunner* runner_;
  // `nvidia-smi topo -m` is slow and the wiring does not change: read once.
  std::optional<core::GpuTopology> topology_;
};

// N simulated GPUs with a given topology, each with `memory_total_mb`.
// Tests (and `trainyard up`) mark GPUs busy with SetMemoryUsed. Thread-safe.
class SimulatedGpuDiscovery : public GpuDiscovery {
 public:
  // `model` is what each GPU reports as its model (--gpu-model).
  SimulatedGpuDiscovery(core::GpuTopology topology, int64_t memory_total_mb,
                        std::string model = "Simulated GPU");
  absl::StatusOr<GpuInventory> Discover() override;
  std::string Name() const override { return "simulated"; }
  // Sets the used memory of GPU `index` as if another process held it.
  // An error names an index outside the node's GPUs.
  absl::Status SetMemoryUsed(int index, int64_t used_mb);

 private:
  const core::GpuTopology topology_;
  const int64_t memory_total_mb_;
  const std::string model_;
  mutable absl::Mutex mu_;
  std::vector<int64_t> used_mb_ ABSL_GUARDED_BY(mu_);
};

// How the agent should find its GPUs.
struct GpuDiscoveryOptions {
  int simulate_gpus = -1;        // >= 0: simulate this many GPUs (--simulate-gpus)
  std::string gpu_topology;      // spec for simulated GPUs (--gpu-topology); "" = flat
  int64_t simulated_memory_mb = 81920;
  std::string simulated_model = "Simulated GPU";  // --gpu-model
  std::string nvml_library = "libnvidia-ml.so.1";
  CommandRunner* runner = nullptr;  // nullptr: real processes
};

// Returns simulated GPUs: `simulate_gpus` flat ones, or the topology spec
// (whose GPU count must then match simulate_gpus when that is >= 0).
absl::StatusOr<GpuDiscoveryPtr> NewSimulatedDiscovery(const GpuDiscoveryOptions& options);

// Returns the discovery to use: simulated when asked for; else NVML when the
// library loads; else nvidia-smi when it runs; else zero simulated GPUs. The
// reason each was passed over is logged. An error only for a bad simulated
// topology spec (naming it) or a negative count.
absl::StatusOr<GpuDiscoveryPtr> ChooseGpuDiscovery(const GpuDiscoveryOptions& options);

}  // namespace trainyard::agent
