// Minimum and maximum allocation per resource, the analogues of
// yarn.scheduler.minimum/maximum-allocation-{mb,vcores,gpus}. One rule
// applies them: api::ValidateJobSpec (src/api/job_spec_validate.cc) refuses
// a role whose resources lie outside them, with the user's field names and
// units; the core schedules only what passed it.
#pragma once

#include <cstdint>

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

}  // namespace trainyard::core
