// Internal to the supervisor: the state it keeps per task. Shared by
// supervisor.cc (API and event loop) and supervisor_attempts.cc (starting
// and ending attempts).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "agent/process_spawn.h"
#include "agent/supervisor.h"

namespace trainyard::agent {

struct Supervisor::Task {
  TaskLaunch launch;
  TaskState state = TaskState::kLaunching;
  int attempt = 0;
  int restarts = 0;
  int oom_restarts = 0;    // of `restarts`, those after OOM kills
  pid_t pid = 0;           // 0 when no process runs; also the process group id
  int pidfd = -1;          // -1 when none or pidfd_open is unsupported
  uint64_t start_time = 0;  // /proc/PID/stat starttime
  // Set while the attempt's keeper runs and its task's exec is not yet
  // seen (Supervisor::CheckStarts); `start_due` is when it fell due.
  std::optional<StartingTask> starting;
  absl::Time start_due = absl::InfinitePast();
  // Set while the loop starts its attempt's keeper without the lock
  // (Supervisor::SpawnAttempt): no pid yet, but an attempt is on its way.
  bool spawning = false;
  bool adopted = false;    // started by an earlier agent: not our child
  std::string cgroup;      // limiter name of the running attempt
  absl::Time start_at = absl::InfiniteFuture();    // next attempt due
  absl::Time started = absl::InfinitePast();       // when the current attempt started
  int backoff_streak = 0;  // NextRestartDelay's streak
  absl::Time sigkill_at = absl::InfiniteFuture();  // kill escalation due
  bool kill_requested = false;
  // Set by FailAttempt: the running attempt is being stopped as a failure
  // (why), so its end goes to the restart policy, not to KILLED.
  std::string fail_reason;
  // Log bytes of the current attempt written before this agent knew it (an
  // adopted task's), left out of the agent's log bytes written.
  int64_t log_bytes_base = 0;
  bool has_exit = false;
  TaskExit last_exit;
  std::string message;
};

// The most attempts the event loop starts in one turn (TakeDue); it reports
// what it has between turns.
constexpr int kStartsPerTurn = 8;

struct Supervisor::Spawn {
  Task* task = nullptr;  // spawning: not erased nor replaced meanwhile
  absl::Time due;
  // Copies, read without the lock.
  TaskLaunch launch;
  int attempt = 0;
  int restarts = 0;
  int oom_restarts = 0;
  std::string cgroup;
  SpawnRequest request;  // its limits filled in by SpawnAttempt
  absl::Status refused;  // not to be started (found under the lock)
  // What SpawnAttempt made.
  absl::StatusOr<StartingTask> started = absl::UnknownError("not started");
  uint64_t start_time = 0;
  int pidfd = -1;
};

// "exited with code 3", "killed by signal 9 (Killed)", "OOM-killed ...".
std::string DescribeExit(const TaskExit& exit);

}  // namespace trainyard::agent
