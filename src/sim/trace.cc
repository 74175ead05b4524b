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

}  // namespace trainyard::sim
