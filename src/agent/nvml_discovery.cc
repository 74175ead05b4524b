// NVML through dlopen. The few types used are declared here with NVML's ABI
// (an int return code, opaque device handles, a memory struct of three
// unsigned long longs), so no NVIDIA header or library is needed to build.
#include "agent/nvml_discovery.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
// nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3): the legacy bus id, then the
// address as numbers, then the ids and the bus id text.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
struct NvmlUtilization {  // nvmlUtilization_t: percent of the last sample period busy
  unsigned int gpu, memory;
};

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

struct NvmlGpuDiscovery::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int) = nullptr;  // optional
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;  // optional
  NvmlReturn (*pci)(NvmlDevice, NvmlPciInfo*) = nullptr;  // optional (nvmlDeviceGetPciInfo_v3)
  NvmlReturn (*ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;              // optional

  std::string Error(const char* call, NvmlReturn rc) const {
    return absl::StrCat(call, " failed: ", error_string ? error_string(rc) : "error ", rc);
  }
};

core::PcieLink ToPcieLink(NvmlTopologyLevel level) {
  switch (level) {
    case NvmlTopologyLevel::kInternal: return core::PcieLink::kInternal;
    case NvmlTopologyLevel::kSingle: return core::PcieLink::kSingleSwitch;
    case NvmlTopologyLevel::kMultiple: return core::PcieLink::kMultipleSwitches;
    case NvmlTopologyLevel::kHostBridge: return core::PcieLink::kHostBridge;
    case NvmlTopologyLevel::kNode: return core::PcieLink::kNumaNode;
    case NvmlTopologyLevel::kSystem: return core::PcieLink::kSystem;
  }
  return core::PcieLink::kSystem;
}

core::GpuLinkMatrix NvmlLinkMatrix(const std::vector<std::vector<NvmlTopologyLevel>>& levels) {
  core::GpuLinkMatrix m;
  for (const auto& row : levels) {
    std::vector<core::PcieLink>& out = m.pcie.emplace_back();
    for (NvmlTopologyLevel level : row) out.push_back(ToPcieLink(level));
  }
  return m;
}

absl::StatusOr<GpuDiscoveryPtr> NvmlGpuDiscovery::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot load ", library, ": ", dlerror()));
  }
  auto api = std::make_unique<Api>();
  const char* missing = nullptr;
  if (!Resolve(handle, "nvmlInit_v2", &api->init)) missing = "nvmlInit_v2";
  else if (!Resolve(handle, "nvmlShutdown", &api->shutdown)) missing = "nvmlShutdown";
  else if (!Resolve(handle, "nvmlDeviceGetCount_v2", &api->count)) missing = "nvmlDeviceGetCount_v2";
  else if (!Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &api->by_index)) missing = "nvmlDeviceGetHandleByIndex_v2";
  else if (!Resolve(handle, "nvmlDeviceGetMemoryInfo", &api->memory)) missing = "nvmlDeviceGetMemoryInfo";
  else if (!Resolve(handle, "nvmlDeviceGetName", &api->name)) missing = "nvmlDeviceGetName";
  else if (!Resolve(handle, "nvmlDeviceGetTopologyCommonAncestor", &api->ancestor)) missing = "nvmlDeviceGetTopologyCommonAncestor";
  Resolve(handle, "nvmlDeviceGetUUID", &api->uuid);
  Resolve(handle, "nvmlDeviceGetUtilizationRates", &api->utilization);
  Resolve(handle, "nvmlDeviceGetPciInfo_v3", &api->pci);
  Resolve(handle, "nvmlErrorString", &api->error_string);
  if (missing != nullptr) {
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat(library, " lacks the symbol ", missing));
  }
  NvmlReturn rc = api->init();
  if (rc != 0) {
    std::string message = api->Error("nvmlInit_v2", rc);
    dlclose(handle);
    return absl::UnavailableError(message);
  }
  return GpuDiscoveryPtr(new NvmlGpuDiscovery(handle, api.release()));
}

NvmlGpuDiscovery::~NvmlGpuDiscovery() {
  api_->shutdown();
  delete api_;
  dlclose(handle_);
}

absl::StatusOr<GpuInventory> NvmlGpuDiscovery::Discover() {
  unsigned int count = 0;
  if (NvmlReturn rc = api_->count(&count); rc != 0) {
    return absl::UnavailableError(api_->Error("nvmlDeviceGetCount_v2", rc));
  }
  if (count > static_cast<unsigned>(core::kMaxGpus)) {
    return absl::OutOfRangeError(absl::StrCat("NVML reports ", count, " GPUs; at most ",
                                              core::kMaxGpus, " per node are supported"));
  }
  GpuInventory inventory{.source = "nvml"};
  std::vector<NvmlDevice> devices(count);
  for (unsigned int i = 0; i < count; ++i) {
    if (NvmlReturn rc = api_->by_index(i, &devices[i]); rc != 0) {
      return absl::UnavailableError(api_->Error("nvmlDeviceGetHandleByIndex_v2", rc));
    }
    NvmlMemory memory{};
    if (NvmlReturn rc = api_->memory(devices[i], &memory); rc != 0) {
      return absl::UnavailableError(api_->Error("nvmlDeviceGetMemoryInfo", rc));
    }
    char name[96] = {0}, uuid[96] = {0};
    api_->name(devices[i], name, sizeof(name));
    if (api_->uuid != nullptr) api_->uuid(devices[i], uuid, sizeof(uuid));
    NvmlUtilization busy{};
    // Unsupported on some GPUs (and under MIG): left unknown.
    bool has_busy = api_->utilization != nullptr && api_->utilization(devices[i], &busy) == 0 && busy.gpu <= 100;
    NvmlPciInfo pci{};
    std::string bus_id;
    if (api_->pci != nullptr && api_->pci(devices[i], &pci) == 0) {
      bus_id = absl::StrFormat("%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
    }
    inventory.gpus.push_back({.index = static_cast<int>(i),
                              .memory_used_mb = static_cast<int64_t>(memory.used >> 20),
                              .memory_total_mb = static_cast<int64_t>(memory.total >> 20),
                              .uuid = uuid,
                              .model = name,
                              .utilization_percent = has_busy ? static_cast<int>(busy.gpu) : -1,
                              .pci_bus_id = bus_id});
  }
  std::vector<std::vector<NvmlTopologyLevel>> levels(
      count, std::vector<NvmlTopologyLevel>(count, NvmlTopologyLevel::kSystem));
  // The common ancestor of a pair is one fact: ask once and mirror it, so a
  // failed call (read as across sockets) cannot make the matrix lopsided.
  for (unsigned int i = 0; i < count; ++i) {
    for (unsigned int j = i + 1; j < count; ++j) {
      int level = 50;
      if (api_->ancestor(devices[i], devices[j], &level) == 0) {
        levels[i][j] = levels[j][i] = static_cast<NvmlTopologyLevel>(level);
      }
    }
  }
  absl::StatusOr<core::GpuTopology> topology =
      core::GpuTopology::FromLinkMatrix(NvmlLinkMatrix(levels));
  if (topology.ok()) {
    inventory.topology = *std::move(topology);
  } else {
    // Placement still works without topology; say why it is missing.
    Log(LogLevel::kWarning, "gpu-discovery", "no GPU topology from NVML (%s); using flat",
        topology.status().message());
    inventory.topology = core::GpuTopology::Flat(count);
  }
  return inventory;
}

}  // namespace trainyard::agent
