// The agent's checks of a launch order (see launch_order.h).
#include "agent/launch_order.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trainyard::agent {
namespace {

// `value` quoted for a message: escaped and cut, it may be anything.
std::string Quoted(const std::string& value) { return absl::StrCat("'", absl::CHexEscape(value.substr(0, 64)), "'"); }

}  // namespace

TaskKey KeyOf(const v1::TaskSpec& spec) { return TaskKey{spec.job(), spec.role(), spec.index(), spec.job_id()}; }

absl::Status CheckLaunchOrder(const v1::TaskSpec& spec) {
  if (absl::Status st = KeyOf(spec).Validate(); !st.ok()) return st;
  if (spec.attempt() < 0) return absl::InvalidArgumentError(absl::StrCat("attempt: ", spec.attempt(), " is negative"));
  for (const auto& entry : spec.env()) {
    const std::string& name = entry.first;  // a value may hold any bytes
    if (name.empty() || absl::StrContains(name, '=') || absl::StrContains(name, '\0')) {
      return absl::InvalidArgumentError(absl::StrCat("env: ", Quoted(name), " is not a variable name"));
    }
  }
  return absl::OkStatus();
}

}  // namespace trainyard::agent
