// Names of task states and task keys.
#include "agent/task.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace trainyard::agent {

const char* TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kPending: return "PENDING";
    case TaskState::kLaunching: return "LAUNCHING";
    case TaskState::kRunning: return "RUNNING";
    case TaskState::kSucceeded: return "SUCCEEDED";
    case TaskState::kFailed: return "FAILED";
    case TaskState::kKilled: return "KILLED";
    case TaskState::kRestarting: return "RESTARTING";
  }
  return "UNKNOWN";
}

bool IsFinal(TaskState state) {
  return state == TaskState::kSucceeded || state == TaskState::kFailed ||
         state == TaskState::kKilled;
}

std::string TaskKey::ToString() const { return absl::StrCat(job, "/", role, "-", index); }

std::string TaskKey::Place() const {
  if (job_id == 0) return ToString();
  return absl::StrCat("job_", job_id, "/", role, "-", index);
}

absl::Status TaskKey::Validate() const {
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"job", &job}, {"role", &role}}) {
    if (value->empty() || *value == "." || *value == ".." ||
        value->find_first_of(std::string("/\0", 2)) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", ToString(), ": ", field, " \"", *value, "\" must be non-empty, not . or .., without '/'"));
    }
  }
  if (index < 0) return absl::InvalidArgumentError(absl::StrCat("task ", ToString(), ": index must be >= 0"));
  return absl::OkStatus();
}

}  // namespace trainyard::agent
