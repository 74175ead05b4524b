// GPU discovery through NVML, loaded at run time with dlopen so the agent
// runs (and builds) on machines without the NVIDIA driver. Only a handful of
// NVML entry points are used; NVLink islands are not read through NVML.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/gpu_discovery.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::agent {

// NVML's nvmlGpuTopologyLevel_t values (nvmlDeviceGetTopologyCommonAncestor).
enum class NvmlTopologyLevel {
  kInternal = 0,
  kSingle = 10,      // one PCIe switch (PIX)
  kMultiple = 20,    // several switches, no host bridge (PXB)
  kHostBridge = 30,  // PHB
  kNode = 40,        // same NUMA node (NODE)
  kSystem = 50,      // across sockets (SYS)
};

// The PCIe link a level stands for; a level NVML adds later reads as kSystem
// (no grouping is claimed that NVML did not state).
core::PcieLink ToPcieLink(NvmlTopologyLevel level);

// The link matrix of pairwise NVML levels (levels[i][j], n x n), which
// core::GpuTopology::FromLinkMatrix turns into groups.
core::GpuLinkMatrix NvmlLinkMatrix(const std::vector<std::vector<NvmlTopologyLevel>>& levels);

class NvmlGpuDiscovery : public GpuDiscovery {
 public:
  // Loads `library` (normally "libnvidia-ml.so.1"), resolves the entry points
  // and initializes NVML. Unavailable, naming the library or symbol, when any
  // of that fails — the normal case on a machine without NVIDIA GPUs.
  static absl::StatusOr<GpuDiscoveryPtr> Open(const std::string& library);
  ~NvmlGpuDiscovery() override;

  absl::StatusOr<GpuInventory> Discover() override;
  std::string Name() const override { return "nvml"; }

  struct Api;  // resolved entry points (nvml_discovery.cc)

 private:
  NvmlGpuDiscovery(void* handle, Api* api) : handle_(handle), api_(api) {}
  void* handle_;
  Api* api_;
};

}  // namespace trainyard::agent
