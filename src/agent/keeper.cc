// The task keeper (keeper.h). RunKeeper and what it calls run in a child of
// the threaded agent when no keeper program is found: between fork and exec
// only async-signal-safe calls on data prepared before the fork.
#include "agent/keeper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "agent/log_capture.h"

extern char** environ;

namespace trainyard::agent {
namespace {

void OnChild(int) {}  // only to interrupt the keeper's ppoll

// The keeper's log writers: 64 KiB buffers each, so not on its stack, and
// built at the program's start, not in a forked keeper.
LogCapture keeper_out, keeper_err;

// The task process itself: limits, account, working dir, logs, exec.
[[noreturn]] void RunTask(const KeeperRequest& r, const ChildArgs& args, int pipe_fd, int out_fd, int err_fd) {
  // Handlers back to their defaults before anything is unblocked: a signal
  // must not run a keeper's handler here, in the memory the task shares with
  // the keeper until its exec (vfork).
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);  // the keeper ignores some
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (const std::string& procs : r.procs_files) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) ChildFail(pipe_fd, kStepCgroup);
    close(fd);
  }
  if (r.switch_account) DropToAccount(r.uid, r.gid, args.groups.data(), args.groups.size(), pipe_fd);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(pipe_fd, kStepNoNewPrivs);
  if (chdir(r.working_dir.c_str()) != 0) ChildFail(pipe_fd, kStepChdir);
  if (r.umask >= 0) umask(static_cast<mode_t>(r.umask));
  if (dup2(out_fd, 1) < 0) ChildFail(pipe_fd, kStepStdout);  // dup2 clears O_CLOEXEC on the target
  if (dup2(err_fd, 2) < 0) ChildFail(pipe_fd, kStepStderr);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  // The command is looked up in the PATH of its own environment (glibc's
  // execvpe would search the keeper's).
  environ = const_cast<char**>(args.envp.data());
  execvp(args.argv[0], args.argv.data());
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

// Length-prefixed fields: integers as 8 little-endian bytes, a string as
// its length then its bytes, a list as its length then its items.
void PutInt(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString(std::string* out, const std::string& s) {
  PutInt(out, s.size());
  out->append(s);
}
void PutStrings(std::string* out, const std::vector<std::string>& list) {
  PutInt(out, list.size());
  for (const std::string& s : list) PutString(out, s);
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  bool Int(uint64_t* v) {
    if (rest_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(rest_[i])) << (8 * i);
    rest_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint64_t n;
    if (!Int(&n) || n > rest_.size()) return false;
    s->assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  bool Strings(std::vector<std::string>* list) {
    uint64_t n;
    if (!Int(&n) || n > rest_.size() / 8) return false;  // each item takes 8 bytes at least
    list->resize(n);
    for (std::string& s : *list) {
      if (!String(&s)) return false;
    }
    return true;
  }
  bool Done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace

// A request starts with this: a keeper of another format refuses it
// instead of reading its fields as others.
constexpr char kRequestMagic[] = "trainyard-keeper-request-1";

std::string EncodeKeeperRequest(const KeeperRequest& r) {
  std::string out(kRequestMagic, sizeof(kRequestMagic) - 1);
  PutStrings(&out, r.argv);
  PutStrings(&out, r.env);
  PutString(&out, r.working_dir);
  PutString(&out, r.log_dir);
  PutString(&out, r.stdout_name);
  PutString(&out, r.stderr_name);
  PutInt(&out, static_cast<uint64_t>(r.log_max_bytes));
  PutStrings(&out, r.procs_files);
  PutInt(&out, r.switch_account ? 1 : 0);
  PutInt(&out, r.uid);
  PutInt(&out, r.gid);
  PutInt(&out, r.groups.size());
  for (uint32_t g : r.groups) PutInt(&out, g);
  PutString(&out, r.exit_status_path);
  PutInt(&out, static_cast<uint64_t>(static_cast<int64_t>(r.umask)));
  return out;
}

bool DecodeKeeperRequest(std::string_view bytes, KeeperRequest* r) {
  std::string_view magic(kRequestMagic, sizeof(kRequestMagic) - 1);
  if (bytes.substr(0, magic.size()) != magic) return false;
  bytes.remove_prefix(magic.size());
  Reader in(bytes);
  uint64_t max_bytes, account, uid, gid, groups, mask;
  if (!in.Strings(&r->argv) || !in.Strings(&r->env) || !in.String(&r->working_dir) || !in.String(&r->log_dir) ||
      !in.String(&r->stdout_name) || !in.String(&r->stderr_name) || !in.Int(&max_bytes) ||
      !in.Strings(&r->procs_files) || !in.Int(&account) || !in.Int(&uid) || !in.Int(&gid) || !in.Int(&groups) ||
      groups > bytes.size() / 8) {
    return false;
  }
  r->groups.clear();
  for (uint64_t i = 0; i < groups; ++i) {
    uint64_t g;
    if (!in.Int(&g) || g > UINT32_MAX) return false;
    r->groups.push_back(static_cast<uint32_t>(g));
  }
  if (!in.String(&r->exit_status_path) || !in.Int(&mask) || !in.Done()) return false;
  auto umask_value = static_cast<int64_t>(mask);
  if (r->argv.empty() || account > 1 || uid > UINT32_MAX || gid > UINT32_MAX || umask_value < -1 ||
      umask_value > 0777) {
    return false;
  }
  r->log_max_bytes = static_cast<int64_t>(max_bytes);
  r->switch_account = account == 1;
  r->uid = static_cast<uint32_t>(uid);
  r->gid = static_cast<uint32_t>(gid);
  r->umask = static_cast<int>(umask_value);
  return r->log_max_bytes >= 0;
}

void ChildFail(int pipe_fd, int step) {
  int report[2] = {step, errno};
  // An agent gone meanwhile closed the pipe's other end: the failure is
  // still this exit, not a SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  (void)!write(pipe_fd, report, sizeof(report));
  _exit(127);
}

// The agent's sockets and files must not leak into tasks, nor stay open in
// a keeper after the agent is gone.
void CloseOtherFds(int keep) {
  bool below_ok = keep <= 3 || syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) == 0;
  bool above_ok = syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0;
  if (!below_ok || !above_ok) {  // kernels before 5.9
    for (int fd = 3; fd < 65536; ++fd) {
      if (fd != keep) close(fd);
    }
  }
}

// With the raw system calls: libc's wrappers would try to reach the
// agent's other threads, which a forked child does not have.
void DropToAccount(uint32_t uid, uint32_t gid, const gid_t* groups, size_t group_count, int pipe_fd) {
  // Ambient capabilities survive a uid change into a program; an agent
  // started with some must not hand them on. (EINVAL on kernels without
  // them: nothing to clear.)
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (syscall(SYS_setgroups, group_count, groups) != 0) ChildFail(pipe_fd, kStepGroups);
  if (syscall(SYS_setresgid, gid, gid, gid) != 0) ChildFail(pipe_fd, kStepGid);
  if (syscall(SYS_setresuid, uid, uid, uid) != 0) ChildFail(pipe_fd, kStepUid);
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || ruid != uid || euid != uid || suid != uid) {
    ChildFail(pipe_fd, kStepUid);
  }
  if (getresgid(&rgid, &egid, &sgid) != 0 || rgid != gid || egid != gid || sgid != gid) {
    ChildFail(pipe_fd, kStepGid);
  }
  if (uid != 0 && syscall(SYS_setresuid, 0, 0, 0) == 0) {
    errno = EPERM;
    ChildFail(pipe_fd, kStepRootBack);
  }
}

ChildArgs::ChildArgs(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     const std::vector<uint32_t>& account_groups) {
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  groups.assign(account_groups.begin(), account_groups.end());
}

// Leads the task's session and process group, waits for the task, records
// its wait status where a restarted agent finds it, and ends the same way
// the task did so the agent's waitpid sees the task's status.
void RunKeeper(const KeeperRequest& r, const ChildArgs& args, int pipe_fd) {
  // The keeper program starts as a session leader already (the agent's
  // posix_spawn: its group may be signalled at once); a forked keeper is
  // not one yet.
  if (getsid(0) != getpid() && setsid() < 0) ChildFail(pipe_fd, kStepSession);
  CloseOtherFds(pipe_fd);
  // Nor the agent's stdin/stdout/stderr: a keeper outliving the agent must
  // not hold the pipes of whoever started the agent.
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    for (int fd = 0; fd <= 2; ++fd) dup2(devnull, fd);
    if (devnull > 2) close(devnull);
  }
  // The logs, opened before the keeper leaves its working directory.
  int dir_fd = open(r.log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || !keeper_out.Open(dir_fd, r.stdout_name.c_str(), r.log_max_bytes)) {
    ChildFail(pipe_fd, kStepStdout);
  }
  if (!keeper_err.Open(dir_fd, r.stderr_name.c_str(), r.log_max_bytes)) ChildFail(pipe_fd, kStepStderr);
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
  // The failure pipe reaches the task but closes at its exec, which is how
  // the agent learns that the task started.
  fcntl(pipe_fd, F_SETFD, FD_CLOEXEC);
  // vfork: the task shares the keeper's memory until its exec (the keeper
  // waits until then), so the keeper's pages are not copied for a process
  // that replaces them at once. RunTask only makes system calls on data
  // prepared before, and ends in exec or _exit; signal dispositions are the
  // task's own (no CLONE_SIGHAND).
  pid_t task = vfork();
  if (task < 0) ChildFail(pipe_fd, kStepSession);
  if (task == 0) RunTask(r, args, pipe_fd, out_pipe[1], err_pipe[1]);
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

void KeeperMain(int request_fd, int pipe_fd) {
  std::string bytes;
  char buffer[65536];
  ssize_t n;
  while ((n = pread(request_fd, buffer, sizeof(buffer), static_cast<off_t>(bytes.size()))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || bytes.size() > (64u << 20)) ChildFail(pipe_fd, kStepKeeperRequest);
    bytes.append(buffer, static_cast<size_t>(n));
  }
  KeeperRequest request;
  if (!DecodeKeeperRequest(bytes, &request)) {
    errno = EINVAL;
    ChildFail(pipe_fd, kStepKeeperRequest);
  }
  ChildArgs args(request);
  RunKeeper(request, args, pipe_fd);
}

}  // namespace trainyard::agent
