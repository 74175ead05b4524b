// fork/exec for task processes. Between fork and exec the child only calls
// async-signal-safe functions on data prepared before the fork. The child is
// a keeper that forks the task proper: see RunKeeper.
#include "agent/process_spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/log_capture.h"

extern char** environ;

namespace trainyard::agent {
namespace {

// Steps the child may fail at; sent to the parent with errno.
enum ChildStep : int {
  kStepSession, kStepCgroup, kStepChdir, kStepStdout, kStepStderr, kStepExec,
  kStepNoNewPrivs, kStepGroups, kStepGid, kStepUid, kStepRootBack, kStepTerminal, kStepMountNamespace
};

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
  }
  return "cannot start";
}

[[noreturn]] void ChildFail(int pipe_fd, int step) {
  int report[2] = {step, errno};
  (void)!write(pipe_fd, report, sizeof(report));
  _exit(127);
}

// The parts of the log paths the keeper opens, split before the fork.
struct LogNames {
  std::string dir;
  std::string out;
  std::string err;
};

void SplitPath(const std::string& path, std::string* dir, std::string* name) {
  size_t slash = path.rfind('/');
  *dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  *name = slash == std::string::npos ? path : path.substr(slash + 1);
}

void OnChild(int) {}  // only to interrupt the keeper's ppoll

// The keeper's log writers: 64 KiB buffers each, so not on its stack, and
// built at the agent's start, not in the forked keeper.
LogCapture keeper_out, keeper_err;

// Closes every descriptor from 3 up except `keep` (the agent's sockets and
// files must not leak into tasks, nor stay open in a keeper after the agent
// is gone).
void CloseOtherFds(int keep) {
  bool below_ok = keep <= 3 || syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) == 0;
  bool above_ok = syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0;
  if (!below_ok || !above_ok) {  // kernels before 5.9
    for (int fd = 3; fd < 65536; ++fd) {
      if (fd != keep) close(fd);
    }
  }
}

// Takes the account's groups, gid and uid with the raw system calls (they
// act on this thread, the only one after fork; libc's wrappers would try to
// reach the agent's other threads), then checks that root cannot come back.
void DropToAccount(const TaskAccount& a, const gid_t* groups, size_t group_count, int pipe_fd) {
  // Ambient capabilities survive a uid change into a program; an agent
  // started with some must not hand them on. (EINVAL on kernels without
  // them: nothing to clear.)
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (syscall(SYS_setgroups, group_count, groups) != 0) ChildFail(pipe_fd, kStepGroups);
  if (syscall(SYS_setresgid, a.gid, a.gid, a.gid) != 0) ChildFail(pipe_fd, kStepGid);
  if (syscall(SYS_setresuid, a.uid, a.uid, a.uid) != 0) ChildFail(pipe_fd, kStepUid);
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || ruid != a.uid || euid != a.uid || suid != a.uid) {
    ChildFail(pipe_fd, kStepUid);
  }
  if (getresgid(&rgid, &egid, &sgid) != 0 || rgid != a.gid || egid != a.gid || sgid != a.gid) {
    ChildFail(pipe_fd, kStepGid);
  }
  if (a.uid != 0 && syscall(SYS_setresuid, 0, 0, 0) == 0) {
    errno = EPERM;
    ChildFail(pipe_fd, kStepRootBack);
  }
}

// The task process itself: limits, account, working dir, logs, exec.
[[noreturn]] void RunTask(const SpawnRequest& r, const std::vector<gid_t>& groups, char* const* argv,
                          char* const* envp, int pipe_fd, int out_fd, int err_fd) {
  // Handlers back to their defaults before anything is unblocked: a signal
  // must not run a keeper's handler here, in the memory the task shares with
  // the keeper until its exec (vfork).
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);  // the keeper ignores some
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (const std::string& procs : r.limits.procs_files) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) ChildFail(pipe_fd, kStepCgroup);
    close(fd);
  }
  if (r.run_as) DropToAccount(*r.run_as, groups.data(), groups.size(), pipe_fd);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(pipe_fd, kStepNoNewPrivs);
  if (chdir(r.working_dir.c_str()) != 0) ChildFail(pipe_fd, kStepChdir);
  if (r.umask >= 0) umask(static_cast<mode_t>(r.umask));
  if (dup2(out_fd, 1) < 0) ChildFail(pipe_fd, kStepStdout);  // dup2 clears O_CLOEXEC on the target
  if (dup2(err_fd, 2) < 0) ChildFail(pipe_fd, kStepStderr);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  // The command is looked up in the PATH of its own environment (glibc's
  // execvpe would search the agent's).
  environ = const_cast<char**>(envp);
  execvp(argv[0], argv);
  ChildFail(pipe_fd, kStepExec);
}

// Writes a wait status as decimal text (async-signal-safe).
void WriteWaitStatus(const char* path, int status) {
  char text[16];
  int n = 0;
  unsigned value = static_cast<unsigned>(status);
  do {
    text[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (int i = 0; i < n / 2; ++i) std::swap(text[i], text[n - 1 - i]);
  text[n++] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, text, n);
  close(fd);
}

// The keeper: leads the task's session and process group, waits for the
// task, records its wait status where a restarted agent finds it, and ends
// the same way the task did so the agent's waitpid sees the task's status.
[[noreturn]] void RunKeeper(const SpawnRequest& r, const LogNames& logs, const std::vector<gid_t>& groups,
                            char* const* argv, char* const* envp, int pipe_fd) {
  if (setsid() < 0) ChildFail(pipe_fd, kStepSession);
  CloseOtherFds(pipe_fd);
  // Nor the agent's stdin/stdout/stderr: a keeper outliving the agent must
  // not hold the pipes of whoever started the agent.
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    for (int fd = 0; fd <= 2; ++fd) dup2(devnull, fd);
    if (devnull > 2) close(devnull);
  }
  // The logs, opened before the keeper leaves the agent's working directory.
  int dir_fd = open(logs.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || !keeper_out.Open(dir_fd, logs.out.c_str(), r.log_max_bytes)) ChildFail(pipe_fd, kStepStdout);
  if (!keeper_err.Open(dir_fd, logs.err.c_str(), r.log_max_bytes)) ChildFail(pipe_fd, kStepStderr);
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) ChildFail(pipe_fd, kStepStdout);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) ChildFail(pipe_fd, kStepStderr);
  if (chdir("/") != 0) ChildFail(pipe_fd, kStepSession);
  // The group's SIGTERM is for the task; SIGKILL still ends both.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2}) signal(sig, SIG_IGN);
  // SIGCHLD stays blocked but for the keeper's ppoll, which it interrupts.
  struct sigaction child = {};
  child.sa_handler = OnChild;
  sigaction(SIGCHLD, &child, nullptr);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  // vfork: the task shares the keeper's memory until its exec (the keeper
  // waits until then), so the keeper's pages, a copy of the agent's, are not
  // copied a second time for a process that replaces them at once. RunTask
  // only makes system calls on data prepared before, and ends in exec or
  // _exit; signal dispositions are the task's own (no CLONE_SIGHAND).
  pid_t task = vfork();
  if (task < 0) ChildFail(pipe_fd, kStepSession);
  if (task == 0) RunTask(r, groups, argv, envp, pipe_fd, out_pipe[1], err_pipe[1]);
  close(pipe_fd);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int status = CaptureUntilExit(task, out_pipe[0], err_pipe[0], keeper_out, keeper_err);
  keeper_out.Close();
  keeper_err.Close();
  if (!r.exit_status_path.empty()) WriteWaitStatus(r.exit_status_path.c_str(), status);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    kill(getpid(), sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
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
  if (r.run_as) DropToAccount(*r.run_as, groups.data(), groups.size(), pipe_fd);
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

// What a forked child needs, prepared before the fork (the child touches
// no allocator).
struct ChildArgs {
  ChildArgs(const std::vector<std::string>& args, const std::vector<std::string>& env,
            const std::optional<TaskAccount>& run_as) {
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    if (run_as) groups.assign(run_as->groups.begin(), run_as->groups.end());
  }
  std::vector<char*> argv, envp;
  std::vector<gid_t> groups;
};

// What a child's failure is told with: the names its steps act on.
struct ChildNames {
  std::string working_dir;
  std::string command;
  std::optional<TaskAccount> run_as;
  std::string stdout_path;  // "" when the child opens no log
  std::string stderr_path;
};

// Forks a child that runs `body(pipe_fd)`, which ends in exec or ChildFail.
// Returns its pid once it has exec'd (the close-on-exec pipe's EOF), or,
// after reaping it, the step it failed at with its errno and the name the
// step acts on.
template <typename Body>
absl::StatusOr<pid_t> ForkChild(Body body, const ChildNames& names) {
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
  int report[2] = {0, 0};
  ssize_t n;
  while ((n = read(pipe_fds[0], report, sizeof(report))) < 0 && errno == EINTR) {
  }
  close(pipe_fds[0]);
  if (n <= 0) return pid;  // EOF: exec succeeded
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int step = report[0];
  bool about_account = step == kStepGroups || step == kStepGid || step == kStepUid || step == kStepRootBack;
  std::string what = step == kStepChdir ? names.working_dir
                     : step == kStepExec ? names.command
                     : step == kStepStdout ? names.stdout_path
                     : step == kStepStderr ? names.stderr_path
                     : about_account ? AccountName(names.run_as)
                                     : std::string();
  return absl::FailedPreconditionError(
      absl::StrCat(StepName(step), what.empty() ? "" : " ", what, ": ", strerror(report[1])));
}

}  // namespace

absl::StatusOr<pid_t> SpawnExecProcess(const ExecSpawnRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("command: must not be empty");
  if (request.stdin_fd < 0 || request.stdout_fd < 0 || request.stderr_fd < 0) {
    return absl::InvalidArgumentError("the command's stdin, stdout and stderr must be given");
  }
  ChildArgs args(request.argv, request.env, request.run_as);
  return ForkChild([&](int pipe_fd) { RunExec(request, args.groups, args.argv.data(), args.envp.data(), pipe_fd); },
                   {.working_dir = request.working_dir, .command = request.argv[0], .run_as = request.run_as});
}

absl::StatusOr<pid_t> SpawnTaskProcess(const SpawnRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("command: must not be empty");
  LogNames logs;
  std::string err_dir;
  SplitPath(request.stdout_path, &logs.dir, &logs.out);
  SplitPath(request.stderr_path, &err_dir, &logs.err);
  if (err_dir != logs.dir) return absl::InvalidArgumentError("stdout_path and stderr_path must share a directory");
  ChildArgs args(request.argv, request.env, request.run_as);
  return ForkChild(
      [&](int pipe_fd) { RunKeeper(request, logs, args.groups, args.argv.data(), args.envp.data(), pipe_fd); },
      {.working_dir = request.working_dir,
       .command = request.argv[0],
       .run_as = request.run_as,
       .stdout_path = request.stdout_path,
       .stderr_path = request.stderr_path});
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
