// The small state file the supervisor keeps per running task under
// DATA/tasks/job_ID/ROLE-INDEX.json (pid, process start time, allocation,
// attempt), so that a restarted agent can re-adopt the tasks it started and
// tell whether a pid still belongs to its task.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/task.h"

namespace trainyard::agent {

struct TaskRecord {
  TaskLaunch launch;      // as given, with working and checkpoint dirs resolved
  int attempt = 0;
  int restarts = 0;
  int oom_restarts = 0;  // of `restarts`, those after OOM kills
  int pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat starttime of `pid`
  std::string cgroup;       // the attempt's cgroup name; "" under rlimits
};

std::string TaskRecordPath(const std::string& data_dir, const TaskKey& key);
// Writes the record atomically (temporary file, then rename).
absl::Status WriteTaskRecord(const std::string& data_dir, const TaskRecord& record);
void RemoveTaskRecord(const std::string& data_dir, const TaskKey& key);
// Reads every record under DATA/tasks. A file that does not parse is
// skipped with a warning naming it, so one bad file does not orphan the rest.
std::vector<TaskRecord> ReadTaskRecords(const std::string& data_dir);

}  // namespace trainyard::agent
