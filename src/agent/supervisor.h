// The task supervisor: starts each task as a child process in its own process
// group, with the Trainyard environment, its per-attempt logs and its limits;
// restarts it per its policy with exponential backoff (restart_backoff.h) and
// a budget; kills it with SIGTERM then SIGKILL after a grace period; reports
// every status change (with exit code, signal and OOM kill) to a listener.
// One event thread waits on a pidfd per process, so no child is ever lost,
// and a state file per task lets a restarted agent re-adopt the tasks it had
// started (Adopt). Time comes from an injected Clock.
#pragma once

#include <sys/types.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/mps.h"
#include "agent/resource_limiter.h"
#include "agent/task.h"
#include "agent/task_logs.h"
#include "agent/task_resources.h"
#include "agent/task_user.h"
#include "common/clock.h"
#include "common/histogram.h"
#include "core/resources/gpu_set.h"

namespace trainyard::agent {

// Receives task status changes, in order, always from the supervisor's one
// event thread and never with its lock held (so it may call back into it).
class TaskListener {
 public:
  virtual ~TaskListener() = default;
  virtual void OnTaskStatus(const TaskStatus& status) = 0;
};

struct SupervisorOptions {
  std::string data_dir;                  // logs/, tasks/, work/, checkpoints/ go here
  // Times attempts, restart delays and kill escalation. Required; outlives
  // the supervisor. Waits for a caller (WaitFor, FollowLogs) are real time.
  const Clock* clock = nullptr;
  ResourceLimiter* limiter = nullptr;    // nullptr: DetectResourceLimiter()
  TaskListener* listener = nullptr;      // may be nullptr
  bool inherit_agent_env = true;         // tasks start from the agent's environment
  // The most bytes kept of each attempt's logs (stdout and stderr half each;
  // the newest part is kept). 0: no cap.
  int64_t log_max_attempt_bytes = 100ll << 20;
  // CUDA MPS for GPU shares (mps.h); nullptr = off. Outlives the supervisor.
  MpsDaemons* mps = nullptr;
  // Who tasks run as and where they may work (task_user.h, task_dirs.h).
  // nullptr: as the agent, anywhere (tests of other parts). Outlives the
  // supervisor.
  const TaskUsers* users = nullptr;
  // The most processes and threads of one task at once (a pids cgroup);
  // 0: no limit.
  int64_t task_pids_max = 0;
  // How long a task's work dir (DATA/work/PLACE) stays after the task ended
  // for good, before it is removed (task_dir_reclaim.h); 0: at once;
  // infinite: never. Logs and checkpoint dirs are never removed by it.
  absl::Duration task_dir_retention = absl::InfiniteDuration();
  // The OCI runtime (runc or crun) that runs tasks with an image
  // (docs/images.md); "": such a task fails to start, naming it.
  std::string oci_runtime;
};

// What a command run inside a task's running attempt takes from it
// (task_exec.h): the attempt's environment, working dir, account and
// cgroups, as its process has them.
struct ExecTarget {
  int attempt = 0;
  uint64_t job_id = 0;
  std::vector<std::string> env;
  std::string working_dir;
  std::optional<TaskAccount> run_as;
  std::vector<std::string> procs_files;  // ResourceLimiter::JoinFiles
  // The container's mount namespace of a task with an image; "" for one
  // without (ExecSpawnRequest.mount_namespace).
  std::string mount_namespace;
};

// What the agent's /metrics shows of its tasks (agent_metrics.h).
struct SupervisorMetrics {
  // Tasks the supervisor holds, by state (indexed by TaskState).
  std::array<int, 7> tasks_by_state{};
  // Thousandths of each GPU held by tasks that have not ended: 1000 for a
  // whole GPU, the sum of the shares on a shared one.
  std::array<int32_t, core::kMaxGpus> gpu_milli{};
  // From an attempt falling due (the launch order, or its restart's time)
  // to its process running: directories, cgroup, fork and exec.
  Histogram spawn_seconds = LatencyHistogram();
  // Bytes of task logs written since this agent started (both streams,
  // stamps included), by the tasks it started or adopted.
  int64_t log_bytes_written = 0;
  // Finished tasks' work dirs removed since this agent started, and the
  // bytes that freed.
  int64_t task_dirs_reclaimed = 0;
  int64_t task_dirs_reclaimed_bytes = 0;
};

// Returns the environment of `attempt` of a task, as "KEY=VALUE" entries:
// `base` (the agent's own, when inherited), then the task's env, then what
// api::SetTaskSelfEnv decides from the launch (TRAINYARD_JOB / ROLE / INDEX /
// WORKER_ID / PORTS / CHECKPOINT_DIR, CUDA_VISIBLE_DEVICES) and the
// per-start TRAINYARD_ATTEMPT and RESTART_COUNT (api::SetAttemptEnv: both
// `attempt`, the launch's attempt plus this agent's restarts of it), which
// win over both.
std::vector<std::string> TaskEnvironment(const std::vector<std::string>& base,
                                         const TaskLaunch& launch, int attempt);

// Every port of the ranges, ascending.
std::vector<uint32_t> PortNumbers(const core::PortRanges& ports);

class Supervisor {
 public:
  // A launch refused because its GPUs are held by another task here carries
  // this payload (the GPUs); GpusHeld tells such a refusal.
  static constexpr char kGpusHeldPayload[] = "trainyard.dev/gpus-held";
  static bool GpusHeld(const absl::Status& st) { return st.GetPayload(kGpusHeldPayload).has_value(); }

  // Creates DATA's directories and starts the event thread. A relative data
  // dir is taken from the current directory now (tasks run elsewhere). An
  // error names the data dir when it cannot be created, or the clock when
  // none is given.
  static absl::StatusOr<std::unique_ptr<Supervisor>> Create(const SupervisorOptions& options);
  // Stops the event thread. Running tasks keep running (an agent restart
  // must not kill training); call KillAll first to stop them.
  ~Supervisor();

  // While it lives, the work dir of one place (TaskKey::Place) is not
  // reclaimed, and its task's last end no longer counts: the agent holds it
  // from before it writes a launch's files there until the task is held.
  class PlaceHold {
   public:
    PlaceHold(Supervisor* supervisor, std::string place);
    ~PlaceHold();
    PlaceHold(const PlaceHold&) = delete;
    PlaceHold& operator=(const PlaceHold&) = delete;

   private:
    Supervisor* const supervisor_;
    const std::string place_;
  };

  // Starts a task. Errors: an empty command, a working_dir that does not
  // exist or lies outside the allowed roots, a user with no account to run
  // as (both InvalidArgument, see ConfineLaunch), a negative max_restarts or limit, a task with the same key that
  // has not ended, or GPUs held by another task that has not ended (shares
  // of one GPU may be held together, up to the whole GPU). The launch itself is asynchronous: failures to start
  // (command not found) arrive as a FAILED status with the reason.
  absl::Status Launch(TaskLaunch launch);
  // Kills a task: SIGTERM to its process group, SIGKILL after its
  // kill_grace; it ends KILLED, never restarted. NotFound for an unknown key;
  // OK (nothing done) for a task that has already ended.
  absl::Status Kill(const TaskKey& key);
  // Stops attempt `attempt` of a task as a failure (its job master found it
  // hung): SIGTERM and SIGCONT (a stopped process must run to act on it),
  // SIGKILL after its kill_grace; the end goes to the restart policy like
  // any failed attempt, with `reason` in its message. OK and nothing done
  // when that attempt is not the one running; NotFound for an unknown key.
  absl::Status FailAttempt(const TaskKey& key, int attempt, const std::string& reason);
  // Kills every task that has not ended.
  void KillAll();
  // Waits until no task is left that has not ended, or `timeout` passes
  // (false).
  bool WaitAllEnded(absl::Duration timeout) const;
  // Drops an ended task from the table (its logs stay). FailedPrecondition
  // when it has not ended.
  absl::Status Forget(const TaskKey& key);

  // Re-adopts the tasks recorded in DATA/tasks by an earlier agent: a task
  // whose pid still runs with the recorded start time is watched again
  // (RUNNING); one that is gone is reported as ended (exit code unknown) and
  // handled by its restart policy. Returns the adopted tasks' status.
  std::vector<TaskStatus> Adopt();

  // The key the task `key` names is held under: `key` itself, or, for a
  // task adopted from the record of an agent from before places were named
  // by the job's id (its key has job_id 0, its places the job's name), that
  // key when the task's launch has key.job_id. The server addresses tasks by
  // id; this finds those. `key` when neither is held.
  TaskKey Holding(const TaskKey& key) const;

  std::optional<TaskStatus> Status(const TaskKey& key) const;
  std::vector<TaskStatus> Snapshot() const;
  // GPUs held by tasks that have not ended.
  core::GpuSet GpusInUse() const;
  // The running attempts, for TaskResourceSampler.
  std::vector<ResourceTarget> ResourceTargets() const;
  // The running attempt of `key`, for a command run inside it.
  // FailedPrecondition when the task is not running (naming its state),
  // NotFound for an unknown key.
  absl::StatusOr<ExecTarget> ExecTargetOf(const TaskKey& key) const;
  // Reads what attempts use (ResourceLimiter::Usage); thread-safe.
  const ResourceLimiter& limiter() const { return *limiter_; }
  // Tasks by state, GPU shares held, spawn latency and log bytes written,
  // now (reads the sizes of the running attempts' logs).
  SupervisorMetrics Metrics() const;
  // Waits until the last status reported to the listener for the task
  // satisfies `done` or the timeout passes; returns that status (nullopt
  // when none was reported yet).
  std::optional<TaskStatus> WaitFor(const TaskKey& key,
                                    const std::function<bool(const TaskStatus&)>& done,
                                    absl::Duration timeout) const;

  // Follows a task's log across its attempts, from options.attempt (-1 =
  // the latest) at options.offset: hands each new piece to `sink` with its
  // attempt and, when an attempt ends and the task runs again, continues
  // with the next attempt from offset 0. Returns OK when the task has ended
  // and everything was read, when `sink` returns false, or when `stop`
  // (checked every `poll`) returns true; an error for a bad key or no logs.
  absl::Status FollowLogs(const TaskKey& key, const LogReadOptions& options,
                          const std::function<bool(int attempt, const std::string& piece)>& sink,
                          const std::function<bool()>& stop = nullptr,
                          absl::Duration poll = absl::Milliseconds(50)) const;

  const TaskLogs& logs() const { return logs_; }
  LimiterKind limiter_kind() const { return limiter_->kind(); }
  // The data dir, absolute.
  const std::string& data_dir() const { return data_dir_; }

 private:
  struct Task;
  Supervisor(const SupervisorOptions& options, std::string data_dir, ResourceLimiterPtr owned_limiter);

  void EventLoop();
  void Wake();
  // Launch's work once its place is marked launching_.
  absl::Status Prepare(TaskLaunch launch) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when the launch's GPUs are not held by a task that has not ended, or
  // only by shares that leave room for the launch's share.
  absl::Status GpusFree(const TaskLaunch& launch) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A share's launch joins its GPU's MPS daemon (the MPS dirs go into the
  // launch); its final end leaves it. Both do nothing without MPS or for
  // whole GPUs. Called with mu_ held, so one task's join and leave cannot
  // cross a relaunch of the same key.
  absl::Status JoinMps(TaskLaunch& launch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaveMps(const TaskLaunch& launch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An attempt being started: what TakeDue copied under the lock, what
  // SpawnAttempt made of it without the lock (supervisor_task.h).
  struct Spawn;
  // Each returns the status changes to report once the lock is released.
  // TakeDue takes at most a few due attempts (marked `spawning`); true when
  // more are due.
  bool TakeDue(absl::Time now, std::vector<Spawn>* spawns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Without the lock, so launches, kills and heartbeats go on meanwhile:
  // the attempt's log dir, cgroups, keeper and record.
  void SpawnAttempt(Spawn& spawn) const ABSL_LOCKS_EXCLUDED(mu_);
  // The spawned attempt's keeper into its task; RUNNING once its exec is
  // seen (CheckStarts), so the loop starts the next without waiting for
  // this one's set-up. A kill or a failure asked for meanwhile goes to it
  // then.
  void InstallAttempt(Spawn& spawn, absl::Time now, std::vector<TaskStatus>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `sig` to the attempt's process group and, for a task with an image, to
  // its container's (SignalContainer).
  void SignalAttempt(const Task& task, int sig) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the container's group was there to take it.
  bool SignalContainer(const Task& task, int sig) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The runtime's `delete --force` of an ended attempt's container, then its
  // state and bundle removed.
  void DeleteContainer(const Task& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The environment an attempt of `l` starts with.
  std::vector<std::string> AttemptEnvironment(const TaskLaunch& l, int attempt) const;
  std::string BundleDir(const Task& task) const;
  // The runtime's command line that runs an attempt of an image task (its
  // bundle written under DATA/bundles).
  absl::StatusOr<std::vector<std::string>> ContainerCommand(const Task& task, const std::vector<std::string>& env)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempts whose start's outcome is now known: RUNNING, or ended as
  // launch failures (FailStart).
  void CheckStarts(std::vector<TaskStatus>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailStart(Task& task, const absl::Status& why, absl::Time now, std::vector<TaskStatus>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReapExited(std::vector<TaskStatus>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndAttempt(Task& task, TaskExit exit, absl::Time now, std::vector<TaskStatus>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an ended attempt's policy wants a restart, and the budget that
  // restart is counted in: OOM kills their own when the launch gives one
  // (TaskLaunch.oom_max_restarts), the failure budget (max_restarts) else.
  struct RestartBudget {
    bool wanted = false;
    bool oom = false;
    int limit = 0;  // -1: unlimited
    int spent = 0;
  };
  static RestartBudget BudgetFor(const Task& task, const TaskExit& exit, bool success);
  void EscalateKills(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The earliest restart or kill escalation due, on clock_.
  absl::Time NextTimer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when a running process has no pidfd, so only polling sees its end.
  bool NeedsPolling() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Persist(const Task& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When due, moves the work dirs past their retention to the trash (under
  // the lock, so no launch meets it) and empties the trash (outside it).
  void ReclaimTaskDirs() ABSL_LOCKS_EXCLUDED(mu_);
  TaskStatus StatusOf(const Task& task, std::string message) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Report(const std::vector<TaskStatus>& statuses) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string data_dir_;
  const Clock* const clock_;
  const bool inherit_agent_env_;
  const int64_t log_max_attempt_bytes_;
  const TaskUsers* const users_;
  const int64_t task_pids_max_;
  const absl::Duration task_dir_retention_;
  const std::string oci_runtime_;
  ResourceLimiterPtr owned_limiter_;
  ResourceLimiter* limiter_;
  TaskListener* listener_;
  MpsDaemons* const mps_;
  TaskLogs logs_;
  int wake_fd_ = -1;  // eventfd
  int jump_listener_ = 0;  // wakes the loop when a fake clock jumps

  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;  // reported_ changed
  std::map<TaskKey, std::unique_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  // The last status the listener was given per task; WaitFor looks here so
  // that a waiter also knows the listener has seen it.
  std::map<TaskKey, TaskStatus> reported_ ABSL_GUARDED_BY(mu_);
  // Status changes made outside the event thread (Kill, Adopt), reported by
  // it so the listener sees one task's changes in order from one thread.
  std::vector<TaskStatus> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Histogram spawn_seconds_ ABSL_GUARDED_BY(mu_) = LatencyHistogram();
  int64_t ended_log_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of attempts that ended
  // Work dir places (TaskKey::Place): when their task ended for good, and
  // those a Launch is preparing (never reclaimed meanwhile).
  std::map<std::string, absl::Time> ended_at_ ABSL_GUARDED_BY(mu_);
  std::multiset<std::string> launching_ ABSL_GUARDED_BY(mu_);
  absl::Time next_reclaim_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t reclaimed_dirs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reclaimed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace trainyard::agent
