// Names of task states and task keys.
#include "agent/task.h"

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

}  // namespace trainyard::agent
