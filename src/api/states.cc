// Job and task state rules (see states.h).
#include "api/states.h"

#include <cctype>
#include <string>

namespace trainyard::api {

bool IsTerminal(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_KILLED || s == v1::JOB_DEADLINE_EXCEEDED;
}

bool IsTerminal(v1::TaskState s) {
  return s == v1::TASK_SUCCEEDED || s == v1::TASK_FAILED || s == v1::TASK_KILLED;
}

const char* JobStateName(v1::JobState s) {
  switch (s) {
    case v1::JOB_QUEUED: return "QUEUED";
    case v1::JOB_SCHEDULED: return "SCHEDULED";
    case v1::JOB_STARTING: return "STARTING";
    case v1::JOB_RUNNING: return "RUNNING";
    case v1::JOB_SUCCEEDED: return "SUCCEEDED";
    case v1::JOB_FAILED: return "FAILED";
    case v1::JOB_KILLED: return "KILLED";
    case v1::JOB_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    default: return "UNKNOWN";
  }
}

const char* TaskStateName(v1::TaskState s) {
  switch (s) {
    case v1::TASK_PENDING: return "PENDING";
    case v1::TASK_LAUNCHING: return "LAUNCHING";
    case v1::TASK_RUNNING: return "RUNNING";
    case v1::TASK_SUCCEEDED: return "SUCCEEDED";
    case v1::TASK_FAILED: return "FAILED";
    case v1::TASK_KILLED: return "KILLED";
    case v1::TASK_RESTARTING: return "RESTARTING";
    default: return "UNKNOWN";
  }
}

const std::vector<v1::JobState>& JobStates() {
  static const std::vector<v1::JobState> kAll = {v1::JOB_QUEUED,    v1::JOB_SCHEDULED, v1::JOB_STARTING,
                                                 v1::JOB_RUNNING,   v1::JOB_SUCCEEDED, v1::JOB_FAILED,
                                                 v1::JOB_KILLED,    v1::JOB_DEADLINE_EXCEEDED};
  return kAll;
}

const std::vector<v1::JobState>& FinishedJobStates() {
  static const std::vector<v1::JobState> kFinished = [] {
    std::vector<v1::JobState> out;
    for (v1::JobState s : JobStates()) {
      if (IsTerminal(s)) out.push_back(s);
    }
    return out;
  }();
  return kFinished;
}

std::optional<v1::JobState> ParseJobState(absl::string_view text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.rfind("JOB_", 0) == 0) upper = upper.substr(4);
  for (v1::JobState s : JobStates()) {
    if (upper == JobStateName(s)) return s;
  }
  return std::nullopt;
}

bool HoldsPlace(v1::TaskState s) {
  return s == v1::TASK_LAUNCHING || s == v1::TASK_RUNNING || s == v1::TASK_RESTARTING;
}

bool IsLegalTransition(v1::JobState from, v1::JobState to) {
  if (from == to) return true;
  if (IsTerminal(from)) return false;
  if (IsTerminal(to)) return true;
  switch (to) {
    case v1::JOB_SCHEDULED: return from == v1::JOB_QUEUED;
    case v1::JOB_STARTING: return from == v1::JOB_SCHEDULED;
    case v1::JOB_RUNNING: return from == v1::JOB_STARTING;
    case v1::JOB_QUEUED:
      return from == v1::JOB_SCHEDULED || from == v1::JOB_STARTING || from == v1::JOB_RUNNING;
    default: return false;
  }
}

bool IsLegalTransition(v1::TaskState from, v1::TaskState to) {
  if (from == to || to == v1::TASK_PENDING) return true;
  if (IsTerminal(from)) return false;
  if (IsTerminal(to)) return true;
  bool started = from == v1::TASK_LAUNCHING || from == v1::TASK_RUNNING || from == v1::TASK_RESTARTING;
  switch (to) {
    case v1::TASK_LAUNCHING: return from == v1::TASK_PENDING || started;
    case v1::TASK_RUNNING: return from == v1::TASK_LAUNCHING || from == v1::TASK_RESTARTING;
    case v1::TASK_RESTARTING: return started;
    default: return false;
  }
}

}  // namespace trainyard::api
