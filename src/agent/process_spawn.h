// Starts one task process: its own session and process group, its working
// directory, stdout/stderr appended to log files, the environment given, and
// its limits entered between fork and exec. Exec failures come back to the
// parent through a close-on-exec pipe, so "command not found" is an error
// with the reason rather than a silent exit.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/resource_limiter.h"

namespace trainyard::agent {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] looked up in the PATH of `env`
  std::vector<std::string> env;   // "KEY=VALUE"
  std::string working_dir;
  std::string stdout_path;
  std::string stderr_path;
  PreparedLimits limits;
};

// Forks and execs. Returns the pid, which is also the process group id. An
// error names the command and the reason (not found, working dir, log file,
// cgroup), after the child has been reaped.
absl::StatusOr<pid_t> SpawnTaskProcess(const SpawnRequest& request);

// The process start time (field 22 of /proc/PID/stat, clock ticks since
// boot), which with the pid identifies a process across pid reuse; an error
// when the process does not exist.
absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid, const std::string& proc_root = "/proc");

}  // namespace trainyard::agent
