// Starting task processes and exec'd commands. A task starts under its
// keeper (keeper.h): the keeper program, started with posix_spawn, or a fork
// of the agent that runs the same RunKeeper. Between fork and exec a child
// only calls async-signal-safe functions on data prepared before the fork.
#include "agent/process_spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "agent/keeper.h"

extern char** environ;

namespace trainyard::agent {
namespace {

const char* StepName(int step) {
  switch (step) {
    case kStepSession: return "cannot start a new session";
    case kStepCgroup: return "cannot join the task's cgroup";
    case kStepChdir: return "cannot enter the working directory";
    case kStepStdout: return "cannot open the stdout log";
    case kStepStderr: return "cannot open the stderr log";
    case kStepExec: return "cannot run the command";
    case kStepNoNewPrivs: return "cannot set no_new_privs";
    case kStepGroups: return "cannot take the supplementary groups of";
    case kStepGid: return "cannot take the group of";
    case kStepUid: return "cannot switch to";
    case kStepRootBack: return "could regain root after switching to";
    case kStepTerminal: return "cannot take the terminal";
    case kStepMountNamespace: return "cannot enter the task's container";
    case kStepKeeperRequest:
      return "the task keeper could not read its request (is trainyard-keeper beside the agent from another "
             "version of trainyard? restart the agent after an upgrade)";
  }
  return "cannot start";
}

void SplitPath(const std::string& path, std::string* dir, std::string* name) {
  size_t slash = path.rfind('/');
  *dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  *name = slash == std::string::npos ? path : path.substr(slash + 1);
}

// The command of `trainyard exec`: its own session, its descriptors, the
// task's cgroups, account and working dir, exec.
[[noreturn]] void RunExec(const ExecSpawnRequest& r, const std::vector<gid_t>& groups, char* const* argv,
                          char* const* envp, int pipe_fd) {
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (setsid() < 0) ChildFail(pipe_fd, kStepSession);
  if (r.tty && ioctl(r.stdin_fd, TIOCSCTTY, 0) != 0) ChildFail(pipe_fd, kStepTerminal);
  // To 0, 1, 2 by way of high numbers, so one given as 0..2 is not
  // overwritten before it is copied.
  int fds[3] = {r.stdin_fd, r.stdout_fd, r.stderr_fd};
  for (int i = 0; i < 3; ++i) {
    fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
    if (fds[i] < 0) ChildFail(pipe_fd, i == 2 ? kStepStderr : kStepStdout);
  }
  for (int i = 0; i < 3; ++i) {
    if (dup2(fds[i], i) < 0) ChildFail(pipe_fd, i == 2 ? kStepStderr : kStepStdout);
  }
  CloseOtherFds(pipe_fd);
  for (const std::string& procs : r.procs_files) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) ChildFail(pipe_fd, kStepCgroup);
    close(fd);
  }
  if (!r.mount_namespace.empty()) {
    // The container's files: its root and mounts (and, as setns does, its
    // root directory as this process's root and working directory).
    int fd = open(r.mount_namespace.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNS) != 0) ChildFail(pipe_fd, kStepMountNamespace);
    close(fd);
  }
  if (r.run_as) DropToAccount(r.run_as->uid, r.run_as->gid, groups.data(), groups.size(), pipe_fd);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(pipe_fd, kStepNoNewPrivs);
  if (chdir(r.working_dir.c_str()) != 0) ChildFail(pipe_fd, kStepChdir);
  // The command is looked up in the PATH of its own environment (glibc's
  // execvpe would search the agent's).
  environ = const_cast<char**>(envp);
  execvp(argv[0], argv);
  ChildFail(pipe_fd, kStepExec);
}

std::string AccountName(const std::optional<TaskAccount>& run_as) {
  if (!run_as) return "";
  return run_as->name.empty() ? absl::StrCat("uid ", run_as->uid)
                              : absl::StrCat(run_as->name, " (uid ", run_as->uid, ")");
}

using Names = StartingTask::Names;

// Forks a child that runs `body(pipe_fd)`, which ends in exec or ChildFail.
// The outcome is read from the returned StartingTask.
template <typename Body>
absl::StatusOr<StartingTask> ForkChild(Body body, Names names) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    close(pipe_fds[0]);
    body(pipe_fds[1]);
    _exit(127);  // not reached: body execs or fails
  }
  close(pipe_fds[1]);
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  return StartingTask(pid, pipe_fds[0], std::move(names));
}

// Starts the keeper program with posix_spawn (vfork and exec: the agent's
// memory is not copied) as the leader of a new session, its request in a
// memfd as fd 3 and the failure pipe as fd 4.
absl::StatusOr<StartingTask> SpawnKeeperProgram(const std::string& program, const KeeperRequest& request,
                                                Names names) {
  std::string bytes = EncodeKeeperRequest(request);
  int memfd = memfd_create("trainyard-keeper-request", MFD_CLOEXEC);
  if (memfd < 0) return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", strerror(errno)));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(memfd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      close(memfd);
      return absl::ResourceExhaustedError(absl::StrCat("writing the keeper's request: ", strerror(e)));
    }
    written += static_cast<size_t>(n);
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    int e = errno;
    close(memfd);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(e)));
  }
  // Above 4, so that neither dup2 below overwrites the other's source.
  int request_fd = fcntl(memfd, F_DUPFD_CLOEXEC, 5);
  int fail_fd = fcntl(pipe_fds[1], F_DUPFD_CLOEXEC, 5);
  close(memfd);
  close(pipe_fds[1]);
  auto close_all = [&] {
    if (request_fd >= 0) close(request_fd);
    if (fail_fd >= 0) close(fail_fd);
  };
  if (request_fd < 0 || fail_fd < 0) {
    int e = errno;
    close_all();
    close(pipe_fds[0]);
    return absl::ResourceExhaustedError(absl::StrCat("fcntl: ", strerror(e)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, request_fd, 3);
  posix_spawn_file_actions_adddup2(&actions, fail_fd, 4);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  char* argv[] = {const_cast<char*>("trainyard-keeper"), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close_all();
  if (rc != 0) {
    close(pipe_fds[0]);
    return absl::FailedPreconditionError(absl::StrCat("cannot run the task keeper ", program, ": ", strerror(rc),
                                                      " (the agent found it there when it started)"));
  }
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  return StartingTask(pid, pipe_fds[0], std::move(names));
}

absl::Mutex keeper_mu(absl::kConstInit);
std::optional<std::string> keeper_program ABSL_GUARDED_BY(keeper_mu);

}  // namespace

absl::StatusOr<pid_t> SpawnExecProcess(const ExecSpawnRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("command: must not be empty");
  if (request.stdin_fd < 0 || request.stdout_fd < 0 || request.stderr_fd < 0) {
    return absl::InvalidArgumentError("the command's stdin, stdout and stderr must be given");
  }
  ChildArgs args(request.argv, request.env, request.run_as ? request.run_as->groups : std::vector<uint32_t>{});
  absl::StatusOr<StartingTask> child =
      ForkChild([&](int pipe_fd) { RunExec(request, args.groups, args.argv.data(), args.envp.data(), pipe_fd); },
                {.working_dir = request.working_dir, .command = request.argv[0], .account = AccountName(request.run_as)});
  if (!child.ok()) return child.status();
  return child->Wait();
}

std::string TrustedKeeperProgram(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(dir, ec);
  if (ec) return "";
  std::string program = real.string() + "/trainyard-keeper";
  auto owned = [](const struct stat& st) { return st.st_uid == 0 || st.st_uid == geteuid(); };
  // The program itself, not a link (its target's directory would go
  // unchecked): root's or the agent's, writable by no one else.
  struct stat st;
  if (lstat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !owned(st) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || access(program.c_str(), X_OK) != 0) {
    return "";
  }
  // Every directory down to it: no one else may put another file there
  // (a sticky one, as /tmp, lets no one replace another's entry).
  for (std::filesystem::path p = real;; p = p.parent_path()) {
    if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !owned(st)) return "";
    bool sticky = (st.st_mode & S_ISVTX) != 0;
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky && p != real)) return "";
    if (p == p.parent_path()) break;
  }
  return program;
}

std::string KeeperProgram() {
  absl::MutexLock lock(&keeper_mu);
  if (!keeper_program) {
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    keeper_program = ec ? "" : TrustedKeeperProgram(self.parent_path().string());
  }
  return *keeper_program;
}

void SetKeeperProgramForTest(std::string path) {
  absl::MutexLock lock(&keeper_mu);
  keeper_program = std::move(path);
}

absl::StatusOr<StartingTask> StartTaskProcess(const SpawnRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("command: must not be empty");
  KeeperRequest keeper{.argv = request.argv,
                       .env = request.env,
                       .working_dir = request.working_dir,
                       .log_max_bytes = std::max<int64_t>(0, request.log_max_bytes),  // <= 0: no cap
                       .procs_files = request.limits.procs_files,
                       .exit_status_path = request.exit_status_path,
                       .umask = request.umask};
  std::string err_dir;
  SplitPath(request.stdout_path, &keeper.log_dir, &keeper.stdout_name);
  SplitPath(request.stderr_path, &err_dir, &keeper.stderr_name);
  if (err_dir != keeper.log_dir) {
    return absl::InvalidArgumentError("stdout_path and stderr_path must share a directory");
  }
  if (request.run_as) {
    keeper.switch_account = true;
    keeper.uid = request.run_as->uid;
    keeper.gid = request.run_as->gid;
    keeper.groups = request.run_as->groups;
  }
  Names names{.working_dir = request.working_dir,
              .command = request.argv[0],
              .account = AccountName(request.run_as),
              .stdout_path = request.stdout_path,
              .stderr_path = request.stderr_path};
  std::string program = KeeperProgram();
  if (!program.empty()) return SpawnKeeperProgram(program, keeper, std::move(names));
  ChildArgs args(keeper);
  return ForkChild([&](int pipe_fd) { RunKeeper(keeper, args, pipe_fd); }, std::move(names));
}

absl::StatusOr<pid_t> SpawnTaskProcess(const SpawnRequest& request) {
  absl::StatusOr<StartingTask> starting = StartTaskProcess(request);
  if (!starting.ok()) return starting.status();
  return starting->Wait();
}

StartingTask::StartingTask(StartingTask&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), pipe_(std::exchange(other.pipe_, -1)), names_(std::move(other.names_)) {}

StartingTask& StartingTask::operator=(StartingTask&& other) noexcept {
  if (this != &other) {
    if (pipe_ >= 0) close(pipe_);
    pid_ = std::exchange(other.pid_, -1);
    pipe_ = std::exchange(other.pipe_, -1);
    names_ = std::move(other.names_);
  }
  return *this;
}

StartingTask::~StartingTask() {
  if (pipe_ >= 0) close(pipe_);
}

std::optional<absl::StatusOr<pid_t>> StartingTask::Poll() {
  if (pipe_ < 0) return absl::FailedPreconditionError("the task's start was already read");
  int report[2] = {0, 0};
  ssize_t n;
  while ((n = read(pipe_, report, sizeof(report))) < 0 && errno == EINTR) {
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
  return Outcome(report, n);
}

absl::StatusOr<pid_t> StartingTask::Wait() {
  while (true) {
    std::optional<absl::StatusOr<pid_t>> outcome = Poll();
    if (outcome) return *std::move(outcome);
    pollfd p{pipe_, POLLIN, 0};
    poll(&p, 1, -1);
  }
}

// EOF: the task exec'd (the close-on-exec pipe closed). A report: the step
// the child failed at and its errno, told with the name the step acts on,
// after the child is reaped.
absl::StatusOr<pid_t> StartingTask::Outcome(const int report[2], ssize_t n) {
  close(pipe_);
  pipe_ = -1;
  if (n <= 0) return pid_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  int step = report[0];
  bool about_account = step == kStepGroups || step == kStepGid || step == kStepUid || step == kStepRootBack;
  std::string what = step == kStepChdir ? names_.working_dir
                     : step == kStepExec ? names_.command
                     : step == kStepStdout ? names_.stdout_path
                     : step == kStepStderr ? names_.stderr_path
                     : about_account ? names_.account
                                     : std::string();
  return absl::FailedPreconditionError(
      absl::StrCat(StepName(step), what.empty() ? "" : " ", what, ": ", strerror(report[1])));
}

std::optional<int> ReadWaitStatus(const std::string& path) {
  std::ifstream in(path);
  int status = 0;
  if (in >> status) return status;
  return std::nullopt;
}

absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid, const std::string& proc_root) {
  std::string path = absl::StrCat(proc_root, "/", pid, "/stat");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("process ", pid, " does not exist"));
  std::ostringstream text;
  text << in.rdbuf();
  std::string stat = text.str();
  // The command name (field 2) may hold spaces and parentheses; fields after
  // the last ')' start at field 3.
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return absl::InvalidArgumentError(absl::StrCat(path, ": no ')'"));
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close_paren + 1), ' ', absl::SkipEmpty());
  uint64_t start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field 22 (starttime) is missing"));
  }
  return start;
}

}  // namespace trainyard::agent
