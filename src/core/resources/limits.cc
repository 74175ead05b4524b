// ValidateRequest: a request must be well formed and lie within the minimum
// and maximum allocation of every resource. Each error names the resource,
// the value and the limit, as a pending reason would.
#include "core/resources/limits.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {
namespace {

absl::Status CheckRange(absl::string_view name, int64_t value, int64_t min, int64_t max) {
  if (value < 0) return absl::InvalidArgumentError(absl::StrCat(name, ": ", value, " is negative"));
  if (value < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", value, " is below the minimum allocation ", min));
  }
  if (value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", value, " is above the maximum allocation ", max));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRequest(const Resource& r, const AllocationLimits& limits) {
  absl::Status s = CheckRange("memory_mb", r.memory_mb, limits.min_memory_mb, limits.max_memory_mb);
  if (s.ok()) {
    s = CheckRange("vcores_milli", r.vcores_milli, limits.min_vcores_milli,
                   limits.max_vcores_milli);
  }
  if (s.ok()) s = CheckRange("gpus", r.gpus, limits.min_gpus, limits.max_gpus);
  if (!s.ok()) return s;
  const int mask_gpus = BitCount(r.gpu_mask);
  if (r.gpu_mask != 0 && r.gpus != mask_gpus) {
    return absl::InvalidArgumentError(absl::StrCat("gpus: ", r.gpus, " does not match gpu_mask ",
                                                   GpuSet(r.gpu_mask).ToString(), " (",
                                                   mask_gpus, " GPUs)"));
  }
  if (r.port_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("port_count: ", r.port_count, " is negative"));
  }
  const int64_t ports = int64_t{r.ports.Count()} + r.port_count;
  if (ports > limits.max_ports) {
    return absl::InvalidArgumentError(
        absl::StrCat("ports: ", ports, " is above the maximum allocation ", limits.max_ports));
  }
  return absl::OkStatus();
}

}  // namespace trainyard::core
