// EnforcedLimitsText (see task_limits.h).
#include "api/task_limits.h"

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"

namespace trainyard::api {
namespace {

// "memory 512Mi (cgroup v1)", "memory 512Mi: not enforced", "memory: no limit".
std::string Part(const char* what, int64_t value, const std::string& value_text, const std::string& by) {
  if (value <= 0) return absl::StrCat(what, ": no limit");
  if (by.empty()) return absl::StrCat(what, " ", value_text, ": not enforced");
  return absl::StrCat(what, " ", value_text, " (", by, ")");
}

}  // namespace

std::string EnforcedLimitsText(const v1::EnforcedLimits& l) {
  std::string text = absl::StrCat(Part("memory", l.memory_mb(), MemoryQuantityText(l.memory_mb()), l.memory_by()), ", ",
                                  Part("cpu", l.vcores_milli(), CpuQuantityText(l.vcores_milli()), l.cpu_by()), ", ",
                                  Part("pids", l.pids_max(), absl::StrCat(l.pids_max()), l.pids_by()));
  if (!l.why_not().empty()) absl::StrAppend(&text, " (", l.why_not(), ")");
  return text;
}

}  // namespace trainyard::api
