// Starts one task process: its own session and process group, its working
// directory, stdout/stderr captured by the keeper into log files, the environment given, and
// its limits entered between fork and exec, under a small keeper process that
// records how it ended even when the agent is gone. Exec failures come back to the
// parent through a close-on-exec pipe, so "command not found" is an error
// with the reason rather than a silent exit.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/resource_limiter.h"
#include "agent/task.h"

namespace trainyard::agent {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] looked up in the PATH of `env`
  std::vector<std::string> env;   // "KEY=VALUE"
  std::string working_dir;
  // The task's logs: the keeper reads its stdout and stderr through pipes
  // and writes them here, each line stamped, each log rotated to stay
  // within log_max_bytes (0: no cap). See log_capture.h.
  std::string stdout_path;
  std::string stderr_path;
  int64_t log_max_bytes = 0;
  PreparedLimits limits;
  // The account the task runs as: after joining its cgroup and before
  // entering its working directory the task takes these groups, gid and
  // uid (which needs root) and cannot regain root. Unset: the agent's own.
  // Every task runs with no_new_privs either way.
  std::optional<TaskAccount> run_as;
  // Where the keeper records the task's wait status (decimal) when the task
  // ends, for an agent that was not there to reap it. "" = not recorded.
  std::string exit_status_path;
  // The umask the command starts with; -1: the agent's (077).
  int umask = -1;
};

// The keeper program tasks start under: `trainyard-keeper` in the running
// binary's directory, where the file and the directory are root's or the
// agent's and writable by no one else; "" where there is none (each keeper
// is then a fork of the agent). Looked up once.
std::string KeeperProgram();
// `trainyard-keeper` in `dir` if it is trusted as above; else "".
std::string TrustedKeeperProgram(const std::string& dir);
// Tests: the keeper program to use from now on ("": fork the agent).
void SetKeeperProgramForTest(std::string path);

// Starts the task under a keeper process: the keeper leads a new session
// and process group, ignores SIGTERM (meant for the task), forks and execs
// the task, waits for it, records its wait status at exit_status_path and
// then ends the way the task ended (same exit code, or the same signal), so
// waitpid on the keeper reads as the task's own status. The keeper stays
// out of the task's cgroup and holds no descriptor of the agent.
// Returns the keeper's pid, which is the process group id to signal. An
// error names the command and the reason (not found, working dir, log file,
// cgroup, the account), after the keeper has been reaped.
absl::StatusOr<pid_t> SpawnTaskProcess(const SpawnRequest& request);

// A task's keeper that has started and whose task has not yet been seen to
// exec (or fail): SpawnTaskProcess in two halves, so that an agent starting
// many tasks need not wait for each one's set-up (a cgroup v1 move alone
// waits ~8 ms for the kernel) before it starts the next.
class StartingTask {
 public:
  StartingTask(StartingTask&& other) noexcept;
  StartingTask& operator=(StartingTask&& other) noexcept;
  StartingTask(const StartingTask&) = delete;
  StartingTask& operator=(const StartingTask&) = delete;
  ~StartingTask();  // closes the pipe; the keeper is the caller's to reap

  pid_t pid() const { return pid_; }
  // Readable (or hung up) when the outcome is known: for poll().
  int fd() const { return pipe_; }
  // Without blocking: nullopt while the task is still being set up; then
  // its keeper's pid once the task has exec'd, or the reason it could not
  // start (as SpawnTaskProcess's, the keeper reaped).
  std::optional<absl::StatusOr<pid_t>> Poll();
  // Blocks until the outcome is known.
  absl::StatusOr<pid_t> Wait();

  // What a failure is told with: the names its steps act on.
  struct Names {
    std::string working_dir;
    std::string command;
    std::string account;      // "" when the task runs as the agent
    std::string stdout_path;  // "" when the child opens no log
    std::string stderr_path;
  };
  StartingTask(pid_t pid, int pipe, Names names) : pid_(pid), pipe_(pipe), names_(std::move(names)) {}

 private:
  absl::StatusOr<pid_t> Outcome(const int report[2], ssize_t n);

  pid_t pid_ = -1;
  int pipe_ = -1;  // read end, non-blocking, closed once the outcome is known
  Names names_;
};

// The first half: starts the keeper. The keeper program leads its own
// session and process group when this returns; a forked keeper (no
// program) makes its own a moment later, so a signal to its group is sent
// once the start's outcome is known (the supervisor's CheckStarts).
absl::StatusOr<StartingTask> StartTaskProcess(const SpawnRequest& request);

// A command run inside a running task (`trainyard exec`, task_exec.h).
struct ExecSpawnRequest {
  std::vector<std::string> argv;  // argv[0] looked up in the PATH of `env`
  std::vector<std::string> env;   // "KEY=VALUE"
  std::string working_dir;
  // The task attempt's cgroup.procs files (ResourceLimiter::JoinFiles).
  std::vector<std::string> procs_files;
  std::optional<TaskAccount> run_as;  // as SpawnRequest.run_as
  // The command's stdin, stdout and stderr; with `tty`, stdin_fd is a
  // terminal's slave side that becomes the new session's controlling one.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool tty = false;
  // "/proc/PID/ns/mnt" of a task's container (an image's): the command
  // runs in it, its working dir and PATH the container's. "": the node's.
  std::string mount_namespace;
};

// Starts the command as a child of the caller (no keeper: it lives no
// longer than its session): a new session and process group (its pid),
// the task's cgroups, account (no_new_privs, no way back to root), working
// directory and environment, the given descriptors as 0, 1 and 2 and no
// other. Errors as SpawnTaskProcess's, after the child has been reaped.
absl::StatusOr<pid_t> SpawnExecProcess(const ExecSpawnRequest& request);

// Reads a wait status recorded by a keeper; nullopt when there is none.
std::optional<int> ReadWaitStatus(const std::string& path);

// The process start time (field 22 of /proc/PID/stat, clock ticks since
// boot), which with the pid identifies a process across pid reuse; an error
// when the process does not exist.
absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid, const std::string& proc_root = "/proc");

}  // namespace trainyard::agent
