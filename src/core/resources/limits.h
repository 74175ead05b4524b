// Minimum and maximum allocation per resource, the analogues of
// yarn.scheduler.minimum/maximum-allocation-{mb,vcores,gpus}.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/resources/resource.h"

namespace trainyard::core {

struct AllocationLimits {
  int64_t min_memory_mb = 0;
  int64_t max_memory_mb = 1 << 20;        // 1 TiB
  int64_t min_vcores_milli = 0;
  int64_t max_vcores_milli = 256 * 1000;
  int32_t min_gpus = 0;
  int32_t max_gpus = 8;
  int32_t max_ports = 64;
};

// OK when every quantity of `request` lies within `limits` and the request is
// well formed (no negatives, gpus == popcount(gpu_mask) when a mask is given,
// not both explicit ports and port_count beyond the limit). The error names
// the resource, the value and the limit, e.g.
// "gpus: 9 is above the maximum allocation 8".
absl::Status ValidateRequest(const Resource& request, const AllocationLimits& limits);

}  // namespace trainyard::core
