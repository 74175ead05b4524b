// A rank host's commands: started in process groups of their own, relayed,
// and stopped as groups (see rank_host_command.h).
#include "jobmaster/client/rank_host_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "jobmaster/client/rank_host_wire.h"

namespace trainyard::jobmaster {
namespace {

// The process groups of the commands running now, for StopRankCommands.
struct LiveGroups {
  absl::Mutex mu;
  std::set<pid_t> groups ABSL_GUARDED_BY(mu);
};

LiveGroups& Live() {
  static LiveGroups* live = new LiveGroups;
  return *live;
}

bool NoGroups(std::set<pid_t>* groups) { return groups->empty(); }

// In the forked child: only async-signal-safe calls, then exec.
[[noreturn]] void RunShell(const char* command, pid_t parent, int out, int err) {
  setpgid(0, 0);
  // A rank host killed outright takes its shells with it (and, as sh
  // execs a lone command, mpirun's daemon); the group stop covers the rest.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the host blocks its stop signals for its signal thread
  signal(SIGPIPE, SIG_DFL);
  int null = open("/dev/null", O_RDONLY);
  if (null < 0) _exit(127);
  if (null != 0) {
    dup2(null, 0);
    close(null);
  }
  dup2(out, 1);
  dup2(err, 2);
  execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
  _exit(127);
}

bool GroupAlive(pid_t group) { return kill(-group, 0) == 0 || errno == EPERM; }

// Where the relay stands.
struct RelayState {
  bool caller_gone = false;
  bool exited = false;
  int status = 0;
  absl::Time sigkill_at = absl::InfiniteFuture();
  absl::Time give_up_at = absl::InfiniteFuture();
};

// Reads what `fd` holds and sends it to the caller; closes it at its end.
void Forward(int conn, int& fd, char kind, RelayState& s) {
  char buf[65536];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close(fd);
    fd = -1;
  } else if (!s.caller_gone && !SendFrame(conn, kind, absl::string_view(buf, static_cast<size_t>(n)))) {
    s.caller_gone = true;
  }
}

// Forwards what the pipes hold now, without waiting for more (and only so
// much: a process that left the group may still be writing).
void Drain(int conn, RankCommand& c, RelayState& s) {
  for (int round = 0; round < 64; ++round) {
    pollfd fds[2] = {{c.out, POLLIN, 0}, {c.err, POLLIN, 0}};
    if (poll(fds, 2, 0) <= 0) return;
    if (fds[0].revents != 0) Forward(conn, c.out, 'O', s);
    if (fds[1].revents != 0) Forward(conn, c.err, 'E', s);
  }
}

bool Reaped(pid_t pid, int* status) {
  pid_t r = waitpid(pid, status, WNOHANG);
  if (r == pid) return true;
  if (r < 0 && errno == ECHILD) {
    *status = 127 << 8;  // not ours to wait for: cannot happen, but never spin on it
    return true;
  }
  return false;
}

// The relay is over: the shell has exited, and its output has ended or no
// one of its group is left to write it (or the group outlived its SIGKILL).
bool RelayDone(const RankCommand& c, const RelayState& s, absl::Time now) {
  return s.exited && ((c.out < 0 && c.err < 0) || !GroupAlive(c.pid) || now >= s.give_up_at);
}

int PollTimeoutMs(const RankCommand& c, const RelayState& s, absl::Time now) {
  // Neither a group's end nor, without a pidfd, a shell's can be polled for.
  int ms = s.exited || c.pidfd < 0 ? 100 : -1;
  absl::Time next = std::min(s.sigkill_at, s.give_up_at);
  if (next != absl::InfiniteFuture()) {
    int until = static_cast<int>(std::max<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 0));
    ms = ms < 0 ? until : std::min(ms, until);
  }
  return ms;
}

}  // namespace

absl::StatusOr<RankCommand> StartRankCommand(const std::string& command) {
  int o[2], e[2];
  if (pipe2(o, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  if (pipe2(e, O_CLOEXEC) != 0) {
    int saved = errno;
    close(o[0]);
    close(o[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(saved)));
  }
  pid_t parent = getpid();
  LiveGroups& live = Live();
  absl::MutexLock lock(&live.mu);  // StopRankCommands sees every group it must stop
  pid_t pid = fork();
  if (pid == 0) RunShell(command.c_str(), parent, o[1], e[1]);
  int saved = errno;
  close(o[1]);
  close(e[1]);
  if (pid < 0) {
    close(o[0]);
    close(e[0]);
    return absl::InternalError(absl::StrCat("cannot start /bin/sh: ", strerror(saved)));
  }
  setpgid(pid, pid);  // also here, so that the group exists before anyone signals it
  live.groups.insert(pid);
  RankCommand c{.pid = pid, .out = o[0], .err = e[0]};
  c.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  return c;
}

int RelayRankCommand(int conn, RankCommand& c, absl::Duration grace) {
  RelayState s;
  for (;;) {
    if (!s.exited) s.exited = Reaped(c.pid, &s.status);
    absl::Time now = absl::Now();
    if (RelayDone(c, s, now)) break;
    if (now >= s.sigkill_at) {
      kill(-c.pid, SIGKILL);
      s.sigkill_at = absl::InfiniteFuture();
      s.give_up_at = now + absl::Seconds(1);
    }
    pollfd fds[4] = {{c.out, POLLIN, 0},
                     {c.err, POLLIN, 0},
                     {s.caller_gone ? -1 : conn, POLLIN, 0},
                     {s.exited ? -1 : c.pidfd, POLLIN, 0}};
    if (poll(fds, 4, PollTimeoutMs(c, s, now)) < 0 && errno != EINTR) {
      s.caller_gone = true;  // cannot watch the caller: stop the command rather than leave it
    }
    if (c.out >= 0 && fds[0].revents != 0) Forward(conn, c.out, 'O', s);
    if (c.err >= 0 && fds[1].revents != 0) Forward(conn, c.err, 'E', s);
    // The caller sends nothing after its hello: any event is its end.
    if (!s.caller_gone && fds[2].revents != 0) s.caller_gone = true;
    if (s.caller_gone && s.sigkill_at == absl::InfiniteFuture() && s.give_up_at == absl::InfiniteFuture()) {
      kill(-c.pid, SIGTERM);
      s.sigkill_at = absl::Now() + grace;
    }
  }
  Drain(conn, c, s);
  for (int* fd : {&c.out, &c.err, &c.pidfd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  LiveGroups& live = Live();
  {
    absl::MutexLock lock(&live.mu);
    live.groups.erase(c.pid);
  }
  return WIFSIGNALED(s.status) ? 128 + WTERMSIG(s.status) : WEXITSTATUS(s.status);
}

void StopRankCommands(absl::Duration grace) {
  LiveGroups& live = Live();
  absl::MutexLock lock(&live.mu);
  for (pid_t group : live.groups) kill(-group, SIGTERM);
  if (live.mu.AwaitWithTimeout(absl::Condition(&NoGroups, &live.groups), grace)) return;
  for (pid_t group : live.groups) kill(-group, SIGKILL);
  // Every relay ends within a second of its group's SIGKILL.
  live.mu.AwaitWithTimeout(absl::Condition(&NoGroups, &live.groups), absl::Seconds(2));
}

}  // namespace trainyard::jobmaster
