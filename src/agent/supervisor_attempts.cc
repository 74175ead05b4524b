// Starting and ending task attempts: environment, limits, spawn, exit
// classification and the restart decision (its delay: restart_backoff.h).
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/process_spawn.h"
#include "agent/restart_backoff.h"
#include "agent/supervisor_task.h"
#include "agent/task_inherited_env.h"
#include "agent/task_record.h"
#include "api/log_lines.h"
#include "api/task_env.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/task_env_names.h"

extern char** environ;

namespace trainyard::agent {
namespace {

constexpr char kAttemptsLog[] = "supervisor";

std::vector<std::string> AgentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace

std::vector<uint32_t> PortNumbers(const core::PortRanges& ports) {
  std::vector<uint32_t> all;
  for (const core::PortRange& r : ports.ranges()) {
    for (uint32_t p = r.begin; p <= r.end; ++p) all.push_back(p);
  }
  return all;
}

std::vector<std::string> TaskEnvironment(const std::vector<std::string>& base,
                                         const TaskLaunch& launch, int attempt) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : base) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : launch.env) env[k] = v;
  api::SetTaskSelfEnv({.job = launch.key.job,
                       .role = launch.key.role,
                       .index = launch.key.index,
                       .worker_id = launch.worker_id,
                       .ports = PortNumbers(launch.ports),
                       .checkpoint_dir = launch.checkpoint_dir,
                       .gpus = launch.gpus.Indices(),
                       .gpu_milli = launch.gpu_milli,
                       .gpu_memory_mb = launch.gpu_memory_mb},
                      &env);
  if (!launch.mps_pipe_dir.empty() && launch.gpu_milli > 0 && !launch.gpus.Empty()) {
    SetMpsClientEnv(launch.gpu_milli, launch.gpu_memory_mb, {launch.mps_pipe_dir, launch.mps_log_dir}, &env);
  }
  api::SetAttemptEnv(attempt, &env);
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(absl::StrCat(k, "=", v));
  return out;
}

std::string DescribeExit(const TaskExit& exit) {
  std::string text = exit.signal != 0
                         ? absl::StrCat("killed by signal ", exit.signal, " (", strsignal(exit.signal), ")")
                         : exit.exit_code >= 0 ? absl::StrCat("exited with code ", exit.exit_code)
                                               : std::string("ended");
  if (exit.oom_killed) text = absl::StrCat("OOM-killed by the kernel (", text, ")");
  if (!exit.message.empty()) absl::StrAppend(&text, ": ", exit.message);
  return text;
}

std::vector<std::string> Supervisor::AttemptEnvironment(const TaskLaunch& l, int attempt) const {
  if (!l.image) {
    return TaskEnvironment(inherit_agent_env_
                               ? TaskInheritedEnvironment(AgentEnvironment(), l.run_as ? &*l.run_as : nullptr)
                               : std::vector<std::string>{},
                           l, attempt);
  }
  // In a container: the image's environment, not the node's, under the
  // task's own; HOME in the task's directory (the image's root is
  // read-only) unless the image or the role says otherwise.
  std::vector<std::string> base = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  auto task_dir = l.env.find(kTaskDirEnv);
  if (task_dir != l.env.end()) base.push_back(absl::StrCat("HOME=", task_dir->second));
  base.insert(base.end(), l.image->env.begin(), l.image->env.end());
  return TaskEnvironment(base, l, attempt);
}

std::string Supervisor::BundleDir(const Task& task) const { return absl::StrCat(data_dir_, "/bundles/", task.cgroup); }

absl::StatusOr<std::vector<std::string>> Supervisor::ContainerCommand(const Task& task,
                                                                      const std::vector<std::string>& env) {
  const TaskLaunch& l = task.launch;
  if (oci_runtime_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("this node has no OCI runtime (runc or crun) to run image ",
                                                      l.image->ref));
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(absl::StrCat("image ", l.image->ref, ": tasks with an image need the agent to run as root"));
  }
  std::string dir = BundleDir(task);
  std::error_code ec;
  UnmountOverlay(dir);  // a leftover of an agent killed mid-attempt
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  chmod(absl::StrCat(data_dir_, "/bundles").c_str(), 0700);
  // A layer of its own over the image's shared root: what the runtime makes
  // there (the directories its mounts need) is this attempt's alone.
  absl::StatusOr<std::string> root = MountOverlay(l.image->rootfs, dir);
  if (!root.ok()) {
    Log(LogLevel::kWarning, kAttemptsLog, "%s: no layer of its own over image %s (%s): the runtime makes its mount "
        "points in the shared root", l.key.ToString(), l.image->ref, root.status().message());
    root = l.image->rootfs;
  }
  BundleSpec b{.rootfs = *root, .args = l.command, .env = env, .cwd = l.working_dir, .cgroups_path = task.cgroup};
  if (l.run_as) {
    b.uid = l.run_as->uid;
    b.gid = l.run_as->gid;
    b.groups = l.run_as->groups;
  }
  auto task_dir = l.env.find(kTaskDirEnv);
  if (task_dir != l.env.end()) b.binds.push_back({task_dir->second, task_dir->second, false});
  if (!l.checkpoint_dir.empty()) b.binds.push_back({l.checkpoint_dir, l.checkpoint_dir, false});
  if (!l.mps_pipe_dir.empty()) b.binds.push_back({l.mps_pipe_dir, l.mps_pipe_dir, false});
  b.binds.insert(b.binds.end(), l.image->volumes.begin(), l.image->volumes.end());
  b.devices = GpuDeviceNodes(l.gpus.Indices());
  absl::StatusOr<std::string> config = BundleConfigJson(b);
  if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat("image ", l.image->ref, ": ", config.status().message()));
  std::string path = dir + "/config.json";
  {
    std::ofstream out(path, std::ios::trunc);
    out << *config;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  std::string state = absl::StrCat(data_dir_, "/runc");
  std::filesystem::create_directories(state, ec);
  chmod(state.c_str(), 0700);
  // A state left by a runtime killed with its attempt names no container now.
  std::filesystem::remove_all(absl::StrCat(state, "/", task.cgroup), ec);
  return std::vector<std::string>{oci_runtime_, "--root", state, "run", "--keep", "--bundle", dir, task.cgroup};
}

bool Supervisor::SignalContainer(const Task& task, int sig) const {
  // The container leads a session of its own (the runtime's setsid): its
  // group is not the keeper's.
  absl::StatusOr<int> init = ContainerInitPid(absl::StrCat(data_dir_, "/runc"), task.cgroup);
  return init.ok() && kill(-*init, sig) == 0;
}

void Supervisor::SignalAttempt(const Task& task, int sig) const {
  bool container = task.launch.image && !task.cgroup.empty();
  // The runtime passes a SIGTERM on to the container's first process: a
  // second would read as "now" to a program that counts them. So TERM and
  // CONT go to the container's group alone when it is there, a KILL to both.
  if (container && SignalContainer(task, sig) && sig != SIGKILL) return;
  kill(-task.pid, sig);
}

void Supervisor::DeleteContainer(const Task& task) {
  std::string state = absl::StrCat(data_dir_, "/runc");
  std::error_code ec;
  if (std::filesystem::exists(absl::StrCat(state, "/", task.cgroup), ec) && !oci_runtime_.empty()) {
    // Bounded: it runs under the supervisor's lock (a process stuck in the
    // kernel is left to the cgroups' release).
    absl::StatusOr<std::string> deleted = NewSubprocessRunner()->Run(
        {"timeout", "-s", "KILL", "5", oci_runtime_, "--root", state, "delete", "--force", task.cgroup});
    if (!deleted.ok()) {
      Log(LogLevel::kWarning, kAttemptsLog, "%s: deleting container %s: %s", task.launch.key.ToString(), task.cgroup,
          deleted.status().message());
    }
  }
  std::filesystem::remove_all(absl::StrCat(state, "/", task.cgroup), ec);
  UnmountOverlay(BundleDir(task));
  std::filesystem::remove_all(BundleDir(task), ec);
}

bool Supervisor::TakeDue(absl::Time now, std::vector<Spawn>* spawns) {
  for (auto& [key, t] : tasks_) {
    Task& task = *t;
    if (task.start_at > now || task.kill_requested) continue;
    if (static_cast<int>(spawns->size()) == kStartsPerTurn) return true;
    if (task.state == TaskState::kRestarting) {
      ++task.attempt;
      ++task.restarts;
    }
    const TaskLaunch& l = task.launch;
    Spawn& s = spawns->emplace_back();
    s.task = &task;
    s.due = std::min(task.start_at, now);
    task.start_at = absl::InfiniteFuture();
    task.started = now;
    task.has_exit = false;
    task.spawning = true;
    // Named per agent (its data dir), so two agents on one machine — a
    // local cluster, or two test clusters — never share a task's cgroup;
    // and by the job's id, so a new job of a reused name never meets the
    // old one's.
    task.cgroup = CgroupSafeName(absl::StrCat(absl::Hex(std::hash<std::string>{}(data_dir_) & 0xffffffffu), "_",
                                              l.key.job, ".", l.key.job_id, "_", l.key.role, "-", l.key.index, "_a",
                                              task.attempt));
    s.launch = l;
    s.attempt = task.attempt;
    s.restarts = task.restarts;
    s.oom_restarts = task.oom_restarts;
    s.cgroup = task.cgroup;
    s.request = {.argv = l.command,
                 .env = AttemptEnvironment(l, task.attempt),
                 .working_dir = l.working_dir,
                 .stdout_path = logs_.Path(l.key, task.attempt, LogStream::kStdout),
                 .stderr_path = logs_.Path(l.key, task.attempt, LogStream::kStderr),
                 .log_max_bytes = log_max_attempt_bytes_ / 2,
                 .run_as = l.run_as,
                 .exit_status_path = logs_.WaitStatusPath(l.key, task.attempt)};
    if (users_ != nullptr && users_->switching() && !l.run_as.has_value()) {
      // A task adopted from a record without an account (written before
      // tasks ran as their users, or by an agent that was not root) would
      // run as the agent: root.
      s.refused = absl::FailedPreconditionError(absl::StrCat(
          "task ", l.key.ToString(), " has no account to run as (its record predates tasks running as "
          "their users); it is not started again as the agent"));
    } else if (l.image) {
      // The runtime starts as root and puts the task's account, working
      // dir and environment into its container; it stays in the attempt's
      // cgroups and the container in one below them.
      absl::StatusOr<std::vector<std::string>> argv = ContainerCommand(task, s.request.env);
      if (!argv.ok()) s.refused = argv.status();
      s.request.argv = argv.ok() ? *std::move(argv) : std::vector<std::string>{};
      s.request.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
      s.request.working_dir = BundleDir(task);
      s.request.run_as.reset();
      // What the runtime makes in the container (the dirs above a mount)
      // is for the task's account to pass through.
      s.request.umask = 022;
    }
  }
  return false;
}

void Supervisor::SpawnAttempt(Spawn& s) const {
  const TaskLaunch& l = s.launch;
  // First: a refused attempt's reason goes into its log too (FailStart).
  if (absl::Status prepared = logs_.Prepare(l.key); !prepared.ok()) {
    s.started = prepared;
    return;
  }
  if (!s.refused.ok()) {
    s.started = s.refused;
    return;
  }
  limiter_->Release(s.cgroup);  // a leftover of an earlier agent would carry old OOM counts
  absl::StatusOr<PreparedLimits> limits =
      limiter_->Prepare(s.cgroup, {.memory_limit_mb = l.memory_limit_mb,
                                   .vcores_milli = l.vcores_milli,
                                   .pids_max = task_pids_max_});
  if (!limits.ok()) {
    s.started = limits.status();
    return;
  }
  s.request.limits = *std::move(limits);
  s.started = StartTaskProcess(s.request);
  if (!s.started.ok()) return;
  pid_t pid = s.started->pid();
  s.start_time = ProcessStartTime(pid).value_or(0);
  s.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  // Recorded now: an agent restarted before the task's exec is seen adopts
  // its keeper. (Nothing else writes or removes the record of a task that
  // is spawning.)
  absl::Status st = WriteTaskRecord(data_dir_, {.launch = l,
                                                .attempt = s.attempt,
                                                .restarts = s.restarts,
                                                .oom_restarts = s.oom_restarts,
                                                .pid = pid,
                                                .start_time = s.start_time,
                                                .cgroup = s.cgroup});
  if (!st.ok()) Log(LogLevel::kWarning, kAttemptsLog, "%s", st.message());
}

void Supervisor::InstallAttempt(Spawn& s, absl::Time now, std::vector<TaskStatus>* out) {
  Task& task = *s.task;
  task.spawning = false;
  if (!s.started.ok()) {
    FailStart(task, s.started.status(), now, out);
    return;
  }
  task.pid = s.started->pid();
  task.adopted = false;
  task.start_time = s.start_time;
  task.pidfd = s.pidfd;
  task.start_due = s.due;
  task.starting = *std::move(s.started);
}

void Supervisor::CheckStarts(std::vector<TaskStatus>* out) {
  for (auto& [key, t] : tasks_) {
    Task& task = *t;
    if (!task.starting) continue;
    std::optional<absl::StatusOr<pid_t>> outcome = task.starting->Poll();
    if (!outcome) continue;
    task.starting.reset();
    absl::Time now = clock_->Now();
    if (!outcome->ok()) {  // its keeper has been reaped
      if (task.pidfd >= 0) close(task.pidfd);
      task.pid = 0;
      task.pidfd = -1;
      FailStart(task, outcome->status(), now, out);
      continue;
    }
    task.state = TaskState::kRunning;
    spawn_seconds_.Observe(std::max(0.0, absl::ToDoubleSeconds(now - task.start_due)));
    Log(LogLevel::kInfo, kAttemptsLog, "%s attempt %d started as pid %d", key.ToString(), task.attempt, task.pid);
    out->push_back(StatusOf(task, ""));
    // A kill or a failure asked for while it started: its group is the
    // task's now.
    if (task.kill_requested || !task.fail_reason.empty()) {
      SignalAttempt(task, SIGTERM);
      SignalAttempt(task, SIGCONT);
      // Its whole grace from now, not from when the kill was asked.
      task.sigkill_at = std::max(task.sigkill_at, now + task.launch.kill_grace);
    }
  }
}

void Supervisor::FailStart(Task& task, const absl::Status& why, absl::Time now, std::vector<TaskStatus>* out) {
  const TaskLaunch& l = task.launch;
  // Leave the reason where `trainyard logs` looks, then end the attempt.
  std::ofstream(logs_.Path(l.key, task.attempt, LogStream::kStderr), std::ios::app)
      << api::LogStamp(absl::ToUnixNanos(absl::Now())) << "trainyard: " << why.message() << "\n";
  std::ofstream(logs_.Path(l.key, task.attempt, LogStream::kStdout), std::ios::app);
  EndAttempt(task, {.exit_code = 127, .launch_failed = true, .message = std::string(why.message())}, now, out);
}

Supervisor::RestartBudget Supervisor::BudgetFor(const Task& task, const TaskExit& exit, bool success) {
  const TaskLaunch& l = task.launch;
  if (exit.oom_killed && l.oom_max_restarts) {
    // The server has weighed the restart policy into the OOM budget.
    return {.wanted = true, .oom = true, .limit = *l.oom_max_restarts, .spent = task.oom_restarts};
  }
  return {.wanted = l.restart_policy == RestartPolicy::kAlways ||
                    (l.restart_policy == RestartPolicy::kOnFailure && !success),
          .limit = l.max_restarts,
          .spent = task.restarts - task.oom_restarts};
}

void Supervisor::EndAttempt(Task& task, TaskExit exit, absl::Time now, std::vector<TaskStatus>* out) {
  const TaskLaunch& l = task.launch;
  // What is left of its process group (and its container's). Not for an
  // adopted task that ended while the agent was down: its pid may belong to
  // someone else by now (its container's is checked by its start time).
  if (task.pid > 0 && !task.adopted) kill(-task.pid, SIGKILL);
  if (l.image && !task.cgroup.empty()) SignalContainer(task, SIGKILL);
  if (task.pidfd >= 0) close(task.pidfd);
  task.pid = 0;
  task.pidfd = -1;
  task.sigkill_at = absl::InfiniteFuture();
  if (!task.cgroup.empty()) {
    exit.oom_killed = exit.oom_killed || limiter_->OomKilled(task.cgroup);
    if (l.image) {
      // The container's own cgroup, kept by the runtime (run --keep), counts
      // an OOM kill in it (cgroup v1 counts it there only); then the
      // runtime deletes the container: its state and its cgroups, those
      // of controllers the agent does not manage too.
      exit.oom_killed = exit.oom_killed || limiter_->OomKilled(absl::StrCat(task.cgroup, "/", task.cgroup));
      DeleteContainer(task);
    }
    limiter_->Release(task.cgroup);
    task.cgroup.clear();
  }
  ended_log_bytes_ += std::max<int64_t>(0, logs_.WrittenBytes(l.key, task.attempt) - task.log_bytes_base);
  task.log_bytes_base = 0;
  if (absl::Status marked = logs_.MarkEnded(l.key, task.attempt, exit); !marked.ok()) {
    // Without the mark, FollowLogs still stops on the final state.
    Log(LogLevel::kWarning, kAttemptsLog, "%s: %s", l.key.ToString(), marked.message());
  }
  bool failed_on_purpose = !task.fail_reason.empty();
  if (failed_on_purpose) {
    exit.message = exit.message.empty() ? task.fail_reason : absl::StrCat(task.fail_reason, "; ", exit.message);
    task.fail_reason.clear();
  }
  task.has_exit = true;
  task.last_exit = exit;
  bool success = !failed_on_purpose && exit.exit_code == 0 && exit.signal == 0 && !exit.oom_killed;
  RestartBudget budget = BudgetFor(task, exit, success);
  std::string what = absl::StrCat("attempt ", task.attempt, " ", DescribeExit(exit));
  if (task.kill_requested) {
    task.state = TaskState::kKilled;
    task.message = absl::StrCat("killed; ", what);
  } else if (budget.wanted && (budget.limit < 0 || budget.spent < budget.limit)) {
    if (budget.oom) ++task.oom_restarts;
    RestartDelay next = NextRestartDelay({.initial = l.backoff_initial, .max = l.backoff_max},
                                         task.backoff_streak, now - task.started);
    absl::Duration delay = next.delay;
    task.backoff_streak = next.streak;
    task.state = TaskState::kRestarting;
    task.start_at = now + delay;
    task.message = absl::StrCat(what, "; ", budget.oom ? "OOM restart " : "restart ", budget.spent + 1, " of ",
                                budget.limit < 0 ? "unlimited" : absl::StrCat(budget.limit), " in ",
                                absl::FormatDuration(delay));
  } else if (success) {
    task.state = TaskState::kSucceeded;
    task.message = what;
  } else {
    task.state = TaskState::kFailed;
    task.message = budget.wanted ? absl::StrCat(what, budget.oom ? "; OOM restarts " : "; max restarts ",
                                                budget.limit, " exhausted after ", task.restarts + 1, " attempts")
                                 : what;
  }
  Log(LogLevel::kInfo, kAttemptsLog, "%s %s: %s", l.key.ToString(), TaskStateName(task.state), task.message);
  if (IsFinal(task.state)) {
    RemoveTaskRecord(data_dir_, l.key);
    LeaveMps(l);
  } else {
    Persist(task);
  }
  out->push_back(StatusOf(task, task.message));
}

absl::StatusOr<ExecTarget> Supervisor::ExecTargetOf(const TaskKey& key) const {
  ExecTarget target;
  TaskLaunch launch;
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(key);
    if (it == tasks_.end()) return absl::NotFoundError(absl::StrCat("task ", key.ToString(), " is not on this node"));
    const Task& task = *it->second;
    if (task.state != TaskState::kRunning || task.pid <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", key.ToString(), " is not running here (", TaskStateName(task.state), ")"));
    }
    launch = task.launch;
    target.attempt = task.attempt;
    target.procs_files = limiter_->JoinFiles(task.cgroup);
    if (launch.image) {
      // Its container's first process, as the runtime recorded it.
      absl::StatusOr<int> init = ContainerInitPid(absl::StrCat(data_dir_, "/runc"), task.cgroup);
      if (!init.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("task ", key.ToString(), ": its container is not running (", init.status().message(), ")"));
      }
      target.mount_namespace = absl::StrCat("/proc/", *init, "/ns/mnt");
    }
  }
  if (users_ != nullptr && users_->switching() && !launch.run_as.has_value()) {
    // As TakeDue: a task with no account would have its command run as the agent.
    return absl::FailedPreconditionError(
        absl::StrCat("task ", key.ToString(), " has no account to run a command as"));
  }
  target.job_id = launch.job_id;
  target.env = AttemptEnvironment(launch, target.attempt);
  target.working_dir = launch.working_dir;
  target.run_as = launch.run_as;
  return target;
}

void Supervisor::Persist(const Task& task) const {
  absl::Status s = WriteTaskRecord(data_dir_, {.launch = task.launch,
                                               .attempt = task.attempt,
                                               .restarts = task.restarts,
                                               .oom_restarts = task.oom_restarts,
                                               .pid = task.pid,
                                               .start_time = task.start_time,
                                               .cgroup = task.cgroup});
  if (!s.ok()) Log(LogLevel::kWarning, kAttemptsLog, "%s", s.message());
}

TaskStatus Supervisor::StatusOf(const Task& task, std::string message) const {
  return {.key = task.launch.key,
          .state = task.state,
          .attempt = task.attempt,
          .restarts = task.restarts,
          .pid = task.pid,
          .has_exit = task.has_exit,
          .exit = task.last_exit,
          .message = std::move(message),
          .launch_attempt = task.launch.attempt,
          .job_id = task.launch.job_id,
          .limits = EnforcedFor(limiter_->confinement(), {.memory_limit_mb = task.launch.memory_limit_mb,
                                                          .vcores_milli = task.launch.vcores_milli,
                                                          .pids_max = task_pids_max_})};
}

}  // namespace trainyard::agent
