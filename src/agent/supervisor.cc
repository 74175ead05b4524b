// Supervisor API and its event thread. The thread sleeps in poll() on an
// eventfd (woken by Launch / Kill / shutdown) and one pidfd per running
// process, with a timeout at the next due restart or kill escalation. Only
// waitpid(pid) of our own pids is used, never waitpid(-1), so other children
// of the agent (nvidia-smi) are left alone.
#include "agent/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/process_spawn.h"
#include "agent/supervisor_task.h"
#include "agent/task_dir_reclaim.h"
#include "agent/task_dirs.h"
#include "agent/task_record.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kSupervisorLog[] = "supervisor";

// Without pidfds (kernels before 5.3) the loop checks children this often.
constexpr absl::Duration kFallbackPoll = absl::Milliseconds(100);

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status ValidateLaunch(const TaskLaunch& l) {
  std::string task = l.key.ToString();
  if (absl::Status s = l.key.Validate(); !s.ok()) return s;
  if (l.command.empty() || l.command[0].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task, ": command must not be empty"));
  }
  if (!l.working_dir.empty() && !l.image && !Exists(l.working_dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task, ": working_dir ", l.working_dir, " does not exist"));
  }
  if (l.max_restarts < 0 || l.memory_limit_mb < 0 || l.vcores_milli < 0 || l.attempt < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task, ": max_restarts, memory_limit_mb, vcores_milli and attempt must be >= 0"));
  }
  return absl::OkStatus();
}

// Exit of a reaped child from its wait status.
TaskExit ExitOfStatus(int status) {
  TaskExit exit;
  if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  return exit;
}

// The exit of a task that ended while nobody was its parent: from the
// status its keeper recorded, else unknown with `unknown_message`.
TaskExit RecordedExit(const std::string& wait_status_path, const std::string& unknown_message) {
  std::optional<int> status = ReadWaitStatus(wait_status_path);
  if (!status) return {.message = unknown_message};
  TaskExit exit = ExitOfStatus(*status);
  exit.message = "ended while the agent was not its parent; status recorded by its keeper";
  return exit;
}

bool PidfdReadable(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

// What poll() takes as its timeout to sleep until `next` on a clock that
// reads `now`, but no longer than `cap` of real time: milliseconds rounded
// up (waking early would only spin), or -1 to sleep until an fd is ready.
int PollTimeoutMs(absl::Time next, absl::Time now, absl::Duration cap) {
  absl::Duration wait = std::min(next - now, cap);
  if (wait == absl::InfiniteDuration()) return -1;
  int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1)));
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
}

// 0711: others may pass through to a directory of their own, not list.
constexpr std::filesystem::perms kPassable = std::filesystem::perms::owner_all |
                                             std::filesystem::perms::group_exec |
                                             std::filesystem::perms::others_exec;
constexpr std::filesystem::perms kPrivate = std::filesystem::perms::owner_all;

// The data dir as an absolute path: the keeper of each task leaves the
// agent's working directory, so a relative path would not lead back.
absl::StatusOr<std::string> AbsoluteDataDir(const std::string& data_dir) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(data_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("data_dir ", data_dir, ": cannot make it absolute: ", ec.message()));
  }
  return absolute.lexically_normal().string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Supervisor>> Supervisor::Create(const SupervisorOptions& options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir: must be set");
  if (options.clock == nullptr) return absl::InvalidArgumentError("clock: must be set");
  absl::StatusOr<std::string> data_dir = AbsoluteDataDir(options.data_dir);
  if (!data_dir.ok()) return data_dir.status();
  std::error_code ec;
  for (const char* sub : {"logs", "tasks", "work", "checkpoints"}) {
    std::string dir = absl::StrCat(*data_dir, "/", sub);
    std::filesystem::create_directories(dir, ec);
    // Logs and task records (env values) are the agent's alone; tasks pass
    // through the data dir to their own work and checkpoint directories.
    bool passable = std::string_view(sub) == "work" || std::string_view(sub) == "checkpoints";
    if (!ec) std::filesystem::permissions(dir, passable ? kPassable : kPrivate, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("data_dir ", *data_dir, ": cannot create ", sub, "/: ", ec.message()));
    }
  }
  std::filesystem::permissions(*data_dir, kPassable, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("data_dir ", *data_dir, ": ", ec.message()));
  ResourceLimiterPtr owned = options.limiter == nullptr ? DetectResourceLimiter() : nullptr;
  return std::unique_ptr<Supervisor>(new Supervisor(options, *std::move(data_dir), std::move(owned)));
}

Supervisor::Supervisor(const SupervisorOptions& options, std::string data_dir, ResourceLimiterPtr owned_limiter)
    : data_dir_(std::move(data_dir)),
      clock_(options.clock),
      inherit_agent_env_(options.inherit_agent_env),
      log_max_attempt_bytes_(options.log_max_attempt_bytes),
      users_(options.users),
      task_pids_max_(options.task_pids_max),
      task_dir_retention_(options.task_dir_retention),
      oci_runtime_(options.oci_runtime),
      owned_limiter_(std::move(owned_limiter)),
      limiter_(owned_limiter_ ? owned_limiter_.get() : options.limiter),
      listener_(options.listener),
      mps_(options.mps),
      logs_(data_dir_),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  jump_listener_ = clock_->AddJumpListener([this] { Wake(); });
  if (std::string keeper = KeeperProgram(); !keeper.empty()) {
    Log(LogLevel::kInfo, kSupervisorLog, "tasks start under the keeper program %s", keeper);
  } else {
    Log(LogLevel::kWarning, kSupervisorLog,
        "no trusted trainyard-keeper beside this binary (root's or the agent's, writable by no one else): each "
        "task's keeper is a fork of the agent, which costs milliseconds per task");
  }
  thread_ = std::thread([this] { EventLoop(); });
}

Supervisor::~Supervisor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  thread_.join();
  clock_->RemoveJumpListener(jump_listener_);
  absl::MutexLock lock(&mu_);  // no other thread is left; the lock is for the analysis
  for (auto& [key, task] : tasks_) {
    if (task->pidfd >= 0) close(task->pidfd);
  }
  close(wake_fd_);
}

void Supervisor::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

absl::Status Supervisor::Launch(TaskLaunch launch) {
  if (absl::Status s = ValidateLaunch(launch); !s.ok()) return s;
  // One source for the job's id: the key names the task's places by it.
  if (launch.job_id == 0) launch.job_id = launch.key.job_id;
  launch.key.job_id = launch.job_id;
  // Its work dir is not reclaimed while it is prepared, nor once it runs.
  PlaceHold hold(this, launch.key.Place());
  return Prepare(std::move(launch));
}

Supervisor::PlaceHold::PlaceHold(Supervisor* supervisor, std::string place)
    : supervisor_(supervisor), place_(std::move(place)) {
  absl::MutexLock lock(&supervisor_->mu_);
  supervisor_->launching_.insert(place_);
  supervisor_->ended_at_.erase(place_);
}

Supervisor::PlaceHold::~PlaceHold() {
  bool wake = false;
  {
    absl::MutexLock lock(&supervisor_->mu_);
    supervisor_->launching_.erase(supervisor_->launching_.find(place_));
    // A task that ended while its launch still held the place (a quick
    // one) was skipped by the reclaim pass: its dir falls due now.
    auto ended = supervisor_->ended_at_.find(place_);
    if (ended != supervisor_->ended_at_.end() && supervisor_->launching_.count(place_) == 0) {
      supervisor_->next_reclaim_ =
          std::min(supervisor_->next_reclaim_, ended->second + supervisor_->task_dir_retention_);
      wake = true;
    }
  }
  if (wake) supervisor_->Wake();
}

absl::Status Supervisor::Prepare(TaskLaunch launch) {
  std::string dir = launch.key.Place();
  if (launch.working_dir.empty()) launch.working_dir = absl::StrCat(data_dir_, "/work/", dir);
  if (launch.checkpoint_dir.empty()) launch.checkpoint_dir = absl::StrCat(data_dir_, "/checkpoints/", dir);
  std::error_code ec;
  std::string task_dir = absl::StrCat(data_dir_, "/work/", dir);
  std::filesystem::create_directories(task_dir, ec);
  if (!launch.image) std::filesystem::create_directories(launch.working_dir, ec);
  std::filesystem::create_directories(launch.checkpoint_dir, ec);
  if (users_ != nullptr) {
    if (absl::Status s = ConfineLaunch(*users_, task_dir, &launch); !s.ok()) return s;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(launch.key);
    if (it != tasks_.end() && !IsFinal(it->second->state)) {
      return absl::AlreadyExistsError(absl::StrCat("task ", launch.key.ToString(), " is already ",
                                                   TaskStateName(it->second->state)));
    }
    if (absl::Status s = GpusFree(launch); !s.ok()) return s;
    if (absl::Status s = JoinMps(launch); !s.ok()) return s;
    auto task = std::make_unique<Task>();
    task->attempt = launch.attempt;
    task->launch = std::move(launch);
    task->start_at = clock_->Now();
    reported_.erase(task->launch.key);
    tasks_[task->launch.key] = std::move(task);
  }
  Wake();
  return absl::OkStatus();
}

void Supervisor::ReclaimTaskDirs() {
  std::string work = data_dir_ + "/work";
  std::vector<std::string> moved;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    if (task_dir_retention_ == absl::InfiniteDuration() || now < next_reclaim_) return;
    // Leftovers (tasks that ended before this agent started) by their
    // mtime, at most this long after they fall due.
    next_reclaim_ = now + std::max(absl::Minutes(1), std::min(task_dir_retention_, absl::Minutes(10)));
    std::set<std::string> live(launching_.begin(), launching_.end());
    for (const auto& [key, task] : tasks_) {
      if (!IsFinal(task->state)) live.insert(key.Place());
    }
    for (const std::string& place : DueWorkDirs(ListWorkDirs(work), live, ended_at_, task_dir_retention_, now)) {
      absl::Status st = MoveToTrash(work, place);
      if (!st.ok() && !absl::IsNotFound(st)) {
        Log(LogLevel::kWarning, kSupervisorLog, "reclaiming work dir %s: %s", place, st.message());
        continue;
      }
      ended_at_.erase(place);
      if (st.ok()) moved.push_back(place);
      std::string job_dir = place.substr(0, place.find('/'));
      bool launching_there = false;
      for (const std::string& l : launching_) launching_there |= l.rfind(job_dir + "/", 0) == 0;
      if (!launching_there) RemoveIfEmpty(work, job_dir);
    }
    // A place still held (its launch has not returned) is not due yet; the
    // hold's release sets the next pass (~PlaceHold).
    for (const auto& [place, at] : ended_at_) {
      if (live.count(place) == 0) next_reclaim_ = std::min(next_reclaim_, at + task_dir_retention_);
    }
  }
  // Removal (maybe of much) runs without the lock: launches and kills go on.
  TrashEmptied emptied = EmptyTrash(work);
  if (!emptied.status.ok()) Log(LogLevel::kWarning, kSupervisorLog, "%s", emptied.status.message());
  if (moved.empty() && emptied.freed_bytes == 0) return;
  Log(LogLevel::kInfo, kSupervisorLog, "reclaimed %d finished task work dir(s), %d bytes, after --task-dir-retention %s: %s",
      static_cast<int>(moved.size()), emptied.freed_bytes, absl::FormatDuration(task_dir_retention_),
      absl::StrJoin(moved, ", "));
  absl::MutexLock lock(&mu_);
  reclaimed_dirs_ += static_cast<int64_t>(moved.size());
  reclaimed_bytes_ += emptied.freed_bytes;
}

absl::Status Supervisor::GpusFree(const TaskLaunch& launch) const {
  // Shares of one GPU may sit together up to the whole GPU; a whole GPU is
  // never shared, with a share or with another whole-GPU task.
  core::GpuSet taken;
  int32_t shared_milli = 0;
  for (const auto& [key, other] : tasks_) {
    if (key == launch.key || IsFinal(other->state)) continue;
    core::GpuSet overlap = other->launch.gpus & launch.gpus;
    if (overlap.Empty()) continue;
    if (launch.gpu_milli > 0 && other->launch.gpu_milli > 0) {
      shared_milli += other->launch.gpu_milli;
    } else {
      taken = taken | overlap;
    }
  }
  if (!taken.Empty()) {
    absl::Status held = absl::FailedPreconditionError(
        absl::StrCat("task ", launch.key.ToString(), ": GPUs ", taken.ToString(), " are held by another task"));
    held.SetPayload(kGpusHeldPayload, absl::Cord(taken.ToString()));
    return held;
  }
  if (launch.gpu_milli > 0 && shared_milli + launch.gpu_milli > 1000) {
    return absl::FailedPreconditionError(absl::StrCat("task ", launch.key.ToString(), ": GPU ",
                                                      launch.gpus.ToString(), " has ", 1000 - shared_milli,
                                                      " thousandths left, the share needs ", launch.gpu_milli));
  }
  return absl::OkStatus();
}

absl::Status Supervisor::JoinMps(TaskLaunch& launch) {
  if (mps_ == nullptr || launch.gpu_milli <= 0 || launch.gpus.Empty()) return absl::OkStatus();
  int gpu = launch.gpus.Indices().front();
  absl::StatusOr<MpsGpu> dirs = mps_->Join(launch.key.Place(), gpu);
  if (!dirs.ok()) {
    return absl::UnavailableError(absl::StrCat("task ", launch.key.ToString(), ": the MPS daemon of GPU ", gpu,
                                               ": ", dirs.status().message()));
  }
  launch.mps_pipe_dir = dirs->pipe_dir;
  launch.mps_log_dir = dirs->log_dir;
  return absl::OkStatus();
}

void Supervisor::LeaveMps(const TaskLaunch& launch) {
  if (mps_ != nullptr && !launch.mps_pipe_dir.empty()) mps_->Leave(launch.key.Place());
}

absl::Status Supervisor::Kill(const TaskKey& key) {
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(key);
    if (it == tasks_.end()) return absl::NotFoundError(absl::StrCat("no task ", key.ToString(), " on this node"));
    Task& task = *it->second;
    if (IsFinal(task.state) || task.kill_requested) return absl::OkStatus();
    task.kill_requested = true;
    if (task.pid > 0 || task.spawning) {
      // One still starting gets it once its task runs (CheckStarts).
      if (!task.starting && !task.spawning) SignalAttempt(task, SIGTERM);
      task.sigkill_at = clock_->Now() + task.launch.kill_grace;
    } else {  // waiting to start or restart: nothing runs
      task.state = TaskState::kKilled;
      task.start_at = absl::InfiniteFuture();
      task.message = "killed before its next attempt started";
      RemoveTaskRecord(data_dir_, key);
      LeaveMps(task.launch);
      pending_.push_back(StatusOf(task, task.message));
    }
  }
  Wake();
  return absl::OkStatus();
}

absl::Status Supervisor::FailAttempt(const TaskKey& key, int attempt, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end()) return absl::NotFoundError(absl::StrCat("no task ", key.ToString(), " on this node"));
  Task& task = *it->second;
  if (task.pid <= 0 || task.attempt != attempt || task.kill_requested || !task.fail_reason.empty()) {
    return absl::OkStatus();
  }
  task.fail_reason = reason.empty() ? "stopped as failed" : reason;
  if (!task.starting) {  // else once its task runs (CheckStarts)
    SignalAttempt(task, SIGTERM);
    SignalAttempt(task, SIGCONT);
  }
  task.sigkill_at = clock_->Now() + task.launch.kill_grace;
  Log(LogLevel::kInfo, kSupervisorLog, "%s attempt %d: stopping it as failed: %s", key.ToString(), attempt,
      task.fail_reason);
  return absl::OkStatus();
}

void Supervisor::KillAll() {
  std::vector<TaskKey> keys;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, task] : tasks_) keys.push_back(key);
  }
  for (const TaskKey& key : keys) {
    // The only error is NotFound, for a task that ended and was forgotten
    // since the keys were read: there is nothing left to kill.
    Kill(key).IgnoreError();
  }
}

absl::Status Supervisor::Forget(const TaskKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end()) return absl::NotFoundError(absl::StrCat("no task ", key.ToString(), " on this node"));
  if (!IsFinal(it->second->state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", key.ToString(), " is ", TaskStateName(it->second->state), "; kill it first"));
  }
  tasks_.erase(it);
  reported_.erase(key);
  return absl::OkStatus();
}

std::vector<TaskStatus> Supervisor::Adopt() {
  std::vector<TaskStatus> adopted;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    for (TaskRecord& r : ReadTaskRecords(data_dir_)) {
      if (tasks_.count(r.launch.key) > 0) continue;
      auto task = std::make_unique<Task>();
      task->attempt = r.attempt;
      task->restarts = r.restarts;
      task->oom_restarts = r.oom_restarts;
      task->cgroup = r.cgroup;
      task->launch = std::move(r.launch);
      Task& t = *task;
      tasks_[t.launch.key] = std::move(task);
      t.log_bytes_base = logs_.WrittenBytes(t.launch.key, t.attempt);
      absl::StatusOr<uint64_t> start = ProcessStartTime(r.pid);
      if (r.pid > 0 && start.ok() && *start == r.start_time) {
        t.pid = r.pid;
        t.start_time = r.start_time;
        t.adopted = true;
        t.pidfd = static_cast<int>(syscall(SYS_pidfd_open, t.pid, 0));
        t.state = TaskState::kRunning;
        if (!t.launch.mps_pipe_dir.empty()) {
          // Its daemon still runs (it is adopted, not started, by Join);
          // without MPS now, the task keeps its daemon until it ends.
          if (absl::Status s = JoinMps(t.launch); !s.ok()) {
            Log(LogLevel::kWarning, kSupervisorLog, "%s", s.message());
          }
        }
        Log(LogLevel::kInfo, kSupervisorLog, "re-adopted %s (pid %d)", t.launch.key.ToString(), t.pid);
        adopted.push_back(StatusOf(t, "re-adopted after an agent restart"));
        pending_.push_back(adopted.back());
      } else {
        t.adopted = true;  // its pid is not ours to signal
        t.pid = r.pid;
        EndAttempt(t, RecordedExit(logs_.WaitStatusPath(t.launch.key, t.attempt),
                                   "ended while the agent was down; exit code unknown"),
                   now, &pending_);
      }
    }
  }
  Wake();
  return adopted;
}

TaskKey Supervisor::Holding(const TaskKey& key) const {
  if (key.job_id == 0) return key;
  TaskKey by_name = key;
  by_name.job_id = 0;
  absl::MutexLock lock(&mu_);
  if (tasks_.count(key) > 0) return key;
  auto it = tasks_.find(by_name);
  return it != tasks_.end() && it->second->launch.job_id == key.job_id ? by_name : key;
}

std::optional<TaskStatus> Supervisor::Status(const TaskKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end()) return std::nullopt;
  return StatusOf(*it->second, it->second->message);
}

std::vector<TaskStatus> Supervisor::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<TaskStatus> all;
  for (const auto& [key, task] : tasks_) all.push_back(StatusOf(*task, task->message));
  return all;
}

core::GpuSet Supervisor::GpusInUse() const {
  absl::MutexLock lock(&mu_);
  core::GpuSet used;
  for (const auto& [key, task] : tasks_) {
    if (!IsFinal(task->state)) used = used | task->launch.gpus;
  }
  return used;
}

std::vector<ResourceTarget> Supervisor::ResourceTargets() const {
  std::vector<ResourceTarget> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, task] : tasks_) {
    if (task->state != TaskState::kRunning || task->pid <= 0) continue;
    out.push_back(ResourceTarget{.key = key,
                                 .attempt = task->attempt,
                                 .job_id = task->launch.job_id,
                                 .pid = task->pid,
                                 .cgroup = task->cgroup,
                                 .started = task->started,
                                 // As enforced: a limit no cgroup holds is no limit to be near.
                                 .memory_limit_mb = limiter_->confinement().memory.empty() ? 0 : task->launch.memory_limit_mb,
                                 .gpus = task->launch.gpus,
                                 .gpu_milli = task->launch.gpu_milli});
  }
  return out;
}

SupervisorMetrics Supervisor::Metrics() const {
  SupervisorMetrics m;
  absl::MutexLock lock(&mu_);
  m.spawn_seconds = spawn_seconds_;
  m.log_bytes_written = ended_log_bytes_;
  for (const auto& [key, task] : tasks_) {
    ++m.tasks_by_state[static_cast<int>(task->state)];
    if (IsFinal(task->state)) continue;
    for (int gpu : task->launch.gpus.Indices()) {
      m.gpu_milli[gpu] += task->launch.gpu_milli > 0 ? task->launch.gpu_milli : 1000;
    }
    if (task->state == TaskState::kRunning) {
      m.log_bytes_written += std::max<int64_t>(0, logs_.WrittenBytes(key, task->attempt) - task->log_bytes_base);
    }
  }
  m.task_dirs_reclaimed = reclaimed_dirs_;
  m.task_dirs_reclaimed_bytes = reclaimed_bytes_;
  return m;
}

bool Supervisor::WaitAllEnded(absl::Duration timeout) const {
  // In real time, as WaitFor below. A task's end is reported (changed_)
  // after its state was set.
  absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (true) {
    bool running = false;
    for (const auto& [key, task] : tasks_) running |= !IsFinal(task->state);
    if (!running) return true;
    if (absl::Now() >= deadline) return false;
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

std::optional<TaskStatus> Supervisor::WaitFor(const TaskKey& key,
                                              const std::function<bool(const TaskStatus&)>& done,
                                              absl::Duration timeout) const {
  // The caller waits in real time whatever the supervisor's clock: a test
  // that holds a fake clock still must not wait for ever.
  absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = reported_.find(key);
    std::optional<TaskStatus> status;
    if (it != reported_.end()) status = it->second;
    if ((status && done(*status)) || absl::Now() >= deadline) return status;
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

absl::Status Supervisor::FollowLogs(const TaskKey& key, const LogReadOptions& options,
                                    const std::function<bool(int, const std::string&)>& sink,
                                    const std::function<bool()>& stop, absl::Duration poll) const {
  if (absl::Status s = key.Validate(); !s.ok()) return s;
  LogReadOptions next = options;
  if (next.attempt < 0) {
    absl::StatusOr<std::vector<int>> attempts = logs_.Attempts(key);
    std::optional<TaskStatus> status = Status(key);
    if (!attempts.ok() && !status) return attempts.status();
    next.attempt = attempts.ok() ? attempts->back() : status->attempt;
  }
  while (stop == nullptr || !stop()) {
    std::optional<TaskStatus> status = Status(key);
    bool task_over = !status || IsFinal(status->state);
    absl::StatusOr<LogChunk> chunk = logs_.Read(key, next);
    // An attempt's log appears when it starts; until then, wait.
    bool not_started = !chunk.ok() && chunk.status().code() == absl::StatusCode::kNotFound &&
                       next.offset == 0 && !task_over;
    if (!chunk.ok() && !not_started) return chunk.status();
    if (chunk.ok() && !chunk->data.empty() && !sink(next.attempt, chunk->data)) return absl::OkStatus();
    if (chunk.ok()) next.offset = chunk->next_offset;
    if (chunk.ok() && chunk->complete) {
      if (status && status->attempt > next.attempt) {
        ++next.attempt;  // attempts are numbered without gaps
        next.offset = 0;
        continue;
      }
      if (task_over) return absl::OkStatus();
    } else if (chunk.ok() && chunk->data.empty() && task_over &&
               (!status || status->attempt == next.attempt)) {
      return absl::OkStatus();  // nothing more will be written (no end mark)
    }
    if (!chunk.ok() || chunk->data.empty()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(poll));
  }
  return absl::OkStatus();
}

void Supervisor::Report(const std::vector<TaskStatus>& statuses) {
  if (statuses.empty()) return;
  if (listener_ != nullptr) {
    for (const TaskStatus& s : statuses) listener_->OnTaskStatus(s);
  }
  absl::MutexLock lock(&mu_);
  for (const TaskStatus& s : statuses) {
    reported_[s.key] = s;
    if (!IsFinal(s.state) || task_dir_retention_ == absl::InfiniteDuration()) continue;
    // Its work dir goes once the retention has passed (ReclaimTaskDirs).
    absl::Time due = clock_->Now() + task_dir_retention_;
    ended_at_[s.key.Place()] = clock_->Now();
    if (due < next_reclaim_) next_reclaim_ = due;
  }
  changed_.SignalAll();
}

void Supervisor::ReapExited(std::vector<TaskStatus>* out) {
  std::vector<std::pair<Task*, TaskExit>> ended;
  for (auto& [key, task] : tasks_) {
    // A keeper still starting is reaped once its start's outcome is read
    // (CheckStarts): a failure's report comes before its exit.
    if (task->pid <= 0 || task->starting) continue;
    int status = 0;
    pid_t r = waitpid(task->pid, &status, WNOHANG);
    if (r == task->pid) {
      ended.emplace_back(task.get(), ExitOfStatus(status));
    } else if (r < 0 && errno == ECHILD) {
      // Not our child (adopted): it has ended when its pidfd is readable, or
      // without pidfds when the pid is gone or now names another process.
      bool gone = task->pidfd >= 0 ? PidfdReadable(task->pidfd)
                                   : ProcessStartTime(task->pid).value_or(0) != task->start_time;
      if (gone) {
        ended.emplace_back(task.get(), RecordedExit(logs_.WaitStatusPath(key, task->attempt),
                                                    "exit code unknown (adopted after an agent restart)"));
      }
    }
  }
  // Read after the exits were seen, so an attempt never ends before it did.
  absl::Time now = clock_->Now();
  for (auto& [task, exit] : ended) EndAttempt(*task, std::move(exit), now, out);
}

void Supervisor::EscalateKills(absl::Time now) {
  for (auto& [key, task] : tasks_) {
    if (task->pid > 0 && task->sigkill_at <= now) {
      Log(LogLevel::kInfo, kSupervisorLog, "%s did not stop within %s of SIGTERM; sending SIGKILL",
          key.ToString(), absl::FormatDuration(task->launch.kill_grace));
      SignalAttempt(*task, SIGKILL);
      task->sigkill_at = absl::InfiniteFuture();
    }
  }
}

absl::Time Supervisor::NextTimer() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, task] : tasks_) {
    if (!task->kill_requested) next = std::min(next, task->start_at);
    if (task->pid > 0) next = std::min(next, task->sigkill_at);
  }
  if (task_dir_retention_ != absl::InfiniteDuration()) next = std::min(next, next_reclaim_);
  return next;
}

bool Supervisor::NeedsPolling() const {
  for (const auto& [key, task] : tasks_) {
    if (task->pid > 0 && task->pidfd < 0) return true;
  }
  return false;
}

void Supervisor::EventLoop() {
  while (true) {
    std::vector<TaskStatus> out;
    std::vector<Spawn> spawns;
    std::vector<pollfd> fds = {{wake_fd_, POLLIN, 0}};
    int timeout_ms = -1;
    bool more = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      out.swap(pending_);
      CheckStarts(&out);
      ReapExited(&out);
      absl::Time now = clock_->Now();
      EscalateKills(now);
      more = TakeDue(now, &spawns);
    }
    if (!spawns.empty()) {
      for (Spawn& s : spawns) SpawnAttempt(s);
      absl::MutexLock lock(&mu_);
      absl::Time now = clock_->Now();
      for (Spawn& s : spawns) InstallAttempt(s, now, &out);
    }
    Report(out);
    ReclaimTaskDirs();
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [key, task] : tasks_) {
        if (task->starting) {
          fds.push_back({task->starting->fd(), POLLIN, 0});
        } else if (task->pid > 0 && task->pidfd >= 0) {
          fds.push_back({task->pidfd, POLLIN, 0});
        }
      }
      // After Report and the reclaim pass, which move the next timer. A jump
      // of the clock wakes the loop (jump_listener_), so sleeping until the
      // next timer by the clock's reading is right for both clocks.
      timeout_ms = more ? 0
                        : PollTimeoutMs(NextTimer(), clock_->Now(),
                                        NeedsPolling() ? kFallbackPoll : absl::InfiniteDuration());
    }
    if (poll(fds.data(), fds.size(), timeout_ms) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
  }
}

}  // namespace trainyard::agent
