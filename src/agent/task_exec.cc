// The exec thread waits in poll() on every session's output (while its
// window has room), its input (while input waits), its pidfd and an
// eventfd; each pass it reads, writes and reaps with non-blocking calls
// under the lock, then hands the pieces to the sink without it.
#include "agent/task_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/process_spawn.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kExecLog[] = "exec";

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

bool NonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// The descriptors of one command: the agent's ends and the command's.
struct Fds {
  int in = -1;     // the agent writes the command's input here (-1: none)
  int out = -1;    // ... reads its stdout (with a terminal: everything)
  int err = -1;    // ... reads its stderr (-1 with a terminal)
  int child_in = -1, child_out = -1, child_err = -1;
  void CloseChild() {
    // The terminal's slave may be all three.
    if (child_err != child_out && child_err != child_in) CloseFd(child_err);
    if (child_out != child_in) CloseFd(child_out);
    CloseFd(child_in);
    child_out = child_err = -1;
  }
  void CloseAll() {
    CloseChild();
    if (in == out) in = -1;
    CloseFd(in);
    CloseFd(out);
    CloseFd(err);
  }
};

absl::Status MakeTerminal(const ExecOrder& order, const ExecTarget& target, Fds* fds) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return absl::InternalError(absl::StrCat("cannot open a pseudo-terminal: ", strerror(errno)));
  char name[128];
  if (grantpt(master) != 0 || unlockpt(master) != 0 || ptsname_r(master, name, sizeof(name)) != 0) {
    close(master);
    return absl::InternalError(absl::StrCat("cannot set up a pseudo-terminal: ", strerror(errno)));
  }
  int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) {
    close(master);
    return absl::InternalError(absl::StrCat("cannot open ", name, ": ", strerror(errno)));
  }
  // The command's own terminal, as a login's would be.
  if (target.run_as) (void)!fchown(slave, target.run_as->uid, target.run_as->gid);
  if (order.rows > 0 && order.cols > 0) {
    winsize size{};
    size.ws_row = static_cast<unsigned short>(std::min(order.rows, 10000));
    size.ws_col = static_cast<unsigned short>(std::min(order.cols, 10000));
    ioctl(master, TIOCSWINSZ, &size);
  }
  NonBlocking(master);
  fds->out = master;
  fds->in = master;
  fds->child_in = fds->child_out = fds->child_err = slave;
  return absl::OkStatus();
}

absl::Status MakePipes(const ExecOrder& order, Fds* fds) {
  int p[2];
  if (order.stdin) {
    if (pipe2(p, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    fds->child_in = p[0];
    fds->in = p[1];
    NonBlocking(fds->in);
  } else {
    fds->child_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fds->child_in < 0) return absl::InternalError(absl::StrCat("/dev/null: ", strerror(errno)));
  }
  for (auto [mine, child] : {std::pair{&fds->out, &fds->child_out}, std::pair{&fds->err, &fds->child_err}}) {
    if (pipe2(p, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    *mine = p[0];
    *child = p[1];
    NonBlocking(*mine);
  }
  return absl::OkStatus();
}

ExecPiece Ended(uint64_t id, uint64_t tag, std::string error) {
  return ExecPiece{.id = id, .tag = tag, .exited = true, .error = std::move(error)};
}

}  // namespace

struct TaskExec::Session {
  uint64_t id = 0;
  uint64_t tag = 0;
  TaskKey key;
  int attempt = 0;
  bool tty = false;
  pid_t pid = 0;
  int pidfd = -1;
  Fds fds;
  std::string input;       // taken from the server, not yet written
  bool input_eof = false;
  int64_t input_taken = 0;
  bool input_news = false;  // input_taken moved since it was last told
  int64_t window = 0;
  int64_t sent = 0;    // output bytes handed to the sink
  int64_t acked = 0;   // ... that the server has taken
  bool exited = false;
  int wait_status = 0;
  std::string error;   // why it was ended early
  absl::Time kill_at = absl::InfiniteFuture();
};

TaskExec::TaskExec(Resolve resolve, TaskExecOptions options, Sink sink)
    : resolve_(std::move(resolve)), options_(options), sink_(std::move(sink)) {
  // A write to a command that closed its stdin must fail (EPIPE), not end
  // the agent.
  signal(SIGPIPE, SIG_IGN);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
}

TaskExec::~TaskExec() {
  Shutdown();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void TaskExec::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    opens_.clear();
  }
  Wake();
  thread_.join();
  // The thread is gone (and with it any start in progress): every command
  // left is killed and reaped here.
  absl::MutexLock lock(&mu_);
  for (auto& [key, s] : sessions_) {
    if (!s->exited) {
      kill(-s->pid, SIGKILL);
      int status;
      while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    s->fds.CloseAll();
    CloseFd(s->pidfd);
  }
  sessions_.clear();
}

void TaskExec::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

int TaskExec::sessions() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

void TaskExec::Refuse(const ExecOrder& order, uint64_t tag, const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    early_.erase({tag, order.id});
    if (starting_ == Key{tag, order.id}) starting_ = Key{0, 0};
  }
  Log(LogLevel::kInfo, kExecLog, "exec in %s for %s refused: %s", order.key.ToString(), order.user,
      std::string(why.message()));
  ExecPiece end = Ended(order.id, tag, std::string(why.message()));
  end.code = static_cast<int>(why.code());
  absl::MutexLock lock(&mu_);
  outbox_.push_back(std::move(end));
  Wake();
}

void TaskExec::Open(const ExecOrder& order, uint64_t tag) {
  if (absl::Status st = order.key.Validate(); !st.ok()) return Refuse(order, tag, st);
  if (order.command.empty()) return Refuse(order, tag, absl::InvalidArgumentError("command: must not be empty"));
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  bool pending = std::any_of(opens_.begin(), opens_.end(),
                             [&](const auto& o) { return o.second == tag && o.first.id == order.id; }) ||
                 starting_ == Key{tag, order.id};
  if (pending || sessions_.count({tag, order.id}) > 0) {
    outbox_.push_back(Ended(order.id, tag, "a session of this id is open already"));
  } else if (static_cast<int>(sessions_.size() + opens_.size()) >= options_.max_sessions) {
    ExecPiece busy = Ended(order.id, tag,
                           absl::StrCat("node runs ", options_.max_sessions,
                                        " commands in tasks already (the most at once); try again later"));
    busy.code = static_cast<int>(absl::StatusCode::kResourceExhausted);
    outbox_.push_back(std::move(busy));
  } else {
    opens_.emplace_back(order, tag);
  }
  Wake();
}

void TaskExec::Start(const ExecOrder& order, uint64_t tag) {
  absl::StatusOr<ExecTarget> target = resolve_(order.key);
  if (!target.ok()) return Refuse(order, tag, target.status());
  Fds fds;
  absl::Status made = order.tty ? MakeTerminal(order, *target, &fds) : MakePipes(order, &fds);
  if (!made.ok()) {
    fds.CloseAll();
    return Refuse(order, tag, made);
  }
  std::vector<std::string> env = std::move(target->env);
  if (order.tty) {
    std::erase_if(env, [](const std::string& e) { return absl::StartsWith(e, "TERM="); });
    bool plain = !order.term.empty() && order.term.size() <= 64 &&
                 std::all_of(order.term.begin(), order.term.end(),
                             [](char c) { return isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '+'; });
    env.push_back(absl::StrCat("TERM=", plain ? order.term : "xterm"));
  }
  absl::StatusOr<pid_t> pid = SpawnExecProcess({.argv = order.command,
                                                .env = std::move(env),
                                                .working_dir = target->working_dir,
                                                .procs_files = target->procs_files,
                                                .run_as = target->run_as,
                                                .stdin_fd = fds.child_in,
                                                .stdout_fd = fds.child_out,
                                                .stderr_fd = fds.child_err,
                                                .tty = order.tty,
                                                .mount_namespace = target->mount_namespace});
  fds.CloseChild();
  if (!pid.ok()) {
    fds.CloseAll();
    return Refuse(order, tag, pid.status());
  }
  Log(LogLevel::kInfo, kExecLog, "exec in %s (attempt %d) for %s: pid %d, %s", order.key.ToString(),
      target->attempt, order.user, *pid, absl::StrJoin(order.command, " ").substr(0, 200));
  auto s = std::make_unique<Session>();
  s->id = order.id;
  s->tag = tag;
  s->key = order.key;
  s->attempt = target->attempt;
  s->tty = order.tty;
  s->pid = *pid;
  s->pidfd = static_cast<int>(syscall(SYS_pidfd_open, *pid, 0));
  s->fds = fds;
  s->window = std::max<int64_t>(order.window_bytes, options_.chunk_bytes);
  {
    absl::MutexLock lock(&mu_);
    outbox_.push_back(ExecPiece{.id = order.id, .tag = tag, .started = true, .attempt = target->attempt});
    Session& session = *s;
    sessions_[{tag, order.id}] = std::move(s);
    starting_ = Key{0, 0};
    auto early = early_.find({tag, order.id});
    if (early != early_.end()) {
      for (const ExecFeed& feed : early->second) FeedLocked(session, feed);
      early_.erase(early);
    }
  }
  // The attempt may have ended while the command was being started (its
  // TaskEnded found no session): then it ends now.
  absl::StatusOr<ExecTarget> still = resolve_(order.key);
  if (!still.ok() || still->attempt != target->attempt) {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find({tag, order.id});
    if (it != sessions_.end()) Stop(*it->second, "the task's attempt ended", /*hangup=*/false, absl::Now());
  }
}

void TaskExec::Feed(const ExecFeed& feed, uint64_t tag) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find({tag, feed.id});
  if (it == sessions_.end()) {
    // Its order may not have been started yet: kept for it (the server
    // holds the client's input to its window, so this is bounded).
    bool pending = std::any_of(opens_.begin(), opens_.end(),
                               [&](const auto& o) { return o.second == tag && o.first.id == feed.id; }) ||
                   starting_ == Key{tag, feed.id};
    if (pending) early_[{tag, feed.id}].push_back(feed);
    return;
  }
  FeedLocked(*it->second, feed);
  Wake();
}

void TaskExec::FeedLocked(Session& s, const ExecFeed& feed) {
  if (feed.close) {
    Stop(s, "the client has gone", /*hangup=*/true, absl::Now());
  } else {
    if (!feed.data.empty()) {
      if (s.fds.in < 0 || !s.error.empty()) {
        // Nowhere to go: dropped, and counted as taken so the server
        // does not hold back the client's next messages for it.
        s.input_taken += static_cast<int64_t>(feed.data.size());
        s.input_news = true;
      } else if (static_cast<int64_t>(s.input.size() + feed.data.size()) > options_.max_input_bytes) {
        Stop(s, absl::StrCat("more than ", options_.max_input_bytes, " bytes of input waited for the command"),
             /*hangup=*/false, absl::Now());
        s.input_taken += static_cast<int64_t>(feed.data.size());
      } else {
        s.input += feed.data;
      }
    }
    if (feed.eof) s.input_eof = true;
    if (feed.rows > 0 && feed.cols > 0 && s.tty && s.fds.out >= 0) {
      winsize size{};
      size.ws_row = static_cast<unsigned short>(std::min(feed.rows, 10000));
      size.ws_col = static_cast<unsigned short>(std::min(feed.cols, 10000));
      ioctl(s.fds.out, TIOCSWINSZ, &size);
    }
    if (feed.acked > s.acked) s.acked = std::min(feed.acked, s.sent);
  }
}

void TaskExec::TaskEnded(const TaskKey& key) {
  absl::MutexLock lock(&mu_);
  bool any = false;
  for (auto& [k, s] : sessions_) {
    if (s->key == key && !s->exited) {
      Stop(*s, "the task's attempt ended", /*hangup=*/false, absl::Now());
      any = true;
    }
  }
  if (any) Wake();
}

void TaskExec::DropTag(uint64_t tag) {
  absl::MutexLock lock(&mu_);
  for (auto& [k, s] : sessions_) {
    if (s->tag == tag) Stop(*s, "the server's stream is gone", /*hangup=*/false, absl::Now());
  }
  Wake();
}

void TaskExec::Stop(Session& s, const std::string& why, bool hangup, absl::Time now) {
  if (s.error.empty()) s.error = why;
  // Nothing more goes in or comes out; the session ends when the command
  // is reaped.
  if (s.fds.in == s.fds.out) s.fds.in = -1;
  CloseFd(s.fds.in);
  CloseFd(s.fds.out);
  CloseFd(s.fds.err);
  s.input_taken += static_cast<int64_t>(s.input.size());  // dropped, counted as taken
  s.input_news = s.input_news || !s.input.empty();
  s.input.clear();
  if (s.exited) return;
  if (hangup) {
    kill(-s.pid, SIGHUP);
    kill(-s.pid, SIGCONT);
    s.kill_at = std::min(s.kill_at, now + options_.kill_grace);
  } else {
    kill(-s.pid, SIGKILL);
  }
}

void TaskExec::Reap(Session& s) {
  if (s.exited) return;
  int status = 0;
  pid_t r;
  while ((r = waitpid(s.pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == s.pid) {
    s.exited = true;
    s.wait_status = status;
    CloseFd(s.pidfd);
    // Input can go nowhere now: dropped, counted as taken.
    if (s.fds.in != s.fds.out) CloseFd(s.fds.in);
    s.fds.in = -1;
    s.input_taken += static_cast<int64_t>(s.input.size());
    s.input_news = s.input_news || !s.input.empty();
    s.input.clear();
  }
}

void TaskExec::WriteInput(Session& s) {
  if (s.fds.in < 0) return;
  while (!s.input.empty()) {
    ssize_t n = write(s.fds.in, s.input.data(), s.input.size());
    if (n > 0) {
      s.input.erase(0, static_cast<size_t>(n));
      s.input_taken += n;
      s.input_news = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // The command closed its stdin: what it did not take is dropped.
    s.input_taken += static_cast<int64_t>(s.input.size());
    s.input_news = true;
    s.input.clear();
    if (s.fds.in != s.fds.out) CloseFd(s.fds.in);
    s.fds.in = -1;
    return;
  }
  // A terminal has no end of input but the ^D the client types.
  if (s.input_eof && !s.tty) CloseFd(s.fds.in);
}

bool TaskExec::ReadOutput(Session& s, int& fd, bool is_stderr, std::vector<ExecPiece>* out) {
  while (fd >= 0) {
    int64_t room = s.window - (s.sent - s.acked);
    if (room <= 0) return true;
    std::string data(static_cast<size_t>(std::min(room, options_.chunk_bytes)), '\0');
    ssize_t n = read(fd, data.data(), data.size());
    if (n > 0) {
      data.resize(static_cast<size_t>(n));
      out->push_back(ExecPiece{.id = s.id, .tag = s.tag, .data = std::move(data), .is_stderr = is_stderr,
                               .offset = s.sent, .input_taken = s.input_news ? s.input_taken : 0});
      s.input_news = false;
      s.sent += n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // After the command's end what it left is read, then the output is
    // over, even if a process it left in the background holds it open.
    if (n < 0 && errno == EAGAIN && !s.exited) return true;
    if (s.fds.in == fd) s.fds.in = -1;
    CloseFd(fd);  // EOF, a terminal's EIO once no one holds it, or drained
  }
  return false;
}

void TaskExec::Service(absl::Time now, std::vector<ExecPiece>* out, std::vector<EndCheck>* checks) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& s = *it->second;
    Reap(s);
    if (!s.exited && now >= s.kill_at) {
      kill(-s.pid, SIGKILL);
      s.kill_at = absl::InfiniteFuture();
    }
    WriteInput(s);
    ReadOutput(s, s.fds.out, /*is_stderr=*/false, out);
    ReadOutput(s, s.fds.err, /*is_stderr=*/true, out);
    if (s.input_news) {
      out->push_back(ExecPiece{.id = s.id, .tag = s.tag, .offset = s.sent, .input_taken = s.input_taken});
      s.input_news = false;
    }
    if (!s.exited || s.fds.out >= 0 || s.fds.err >= 0) {
      ++it;
      continue;
    }
    // Killed by a signal with no reason of ours: perhaps with the rest of
    // its attempt's cgroup, before the attempt's end was reported
    // (TaskEnded); Run asks the supervisor without the lock.
    if (s.error.empty() && WIFSIGNALED(s.wait_status)) checks->push_back({out->size(), s.key, s.attempt});
    ExecPiece end{.id = s.id, .tag = s.tag, .offset = s.sent, .exited = true, .error = s.error};
    if (WIFEXITED(s.wait_status)) {
      end.exit_code = WEXITSTATUS(s.wait_status);
    } else if (WIFSIGNALED(s.wait_status)) {
      end.signal = WTERMSIG(s.wait_status);
    }
    Log(LogLevel::kInfo, kExecLog, "exec in %s: pid %d ended (%s)%s", s.key.ToString(), s.pid,
        end.signal > 0 ? absl::StrCat("signal ", end.signal) : absl::StrCat("exit code ", end.exit_code),
        s.error.empty() ? "" : absl::StrCat(": ", s.error));
    out->push_back(std::move(end));
    s.fds.CloseAll();
    CloseFd(s.pidfd);
    it = sessions_.erase(it);
  }
}

void TaskExec::Run() {
  std::vector<pollfd> fds;
  for (;;) {
    // Orders one at a time, each marked as being started (its early
    // feeds wait for it).
    for (;;) {
      std::pair<ExecOrder, uint64_t> open;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        if (opens_.empty()) break;
        open = std::move(opens_.front());
        opens_.pop_front();
        starting_ = Key{open.second, open.first.id};
      }
      Start(open.first, open.second);
    }
    int timeout_ms = -1;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      fds.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      absl::Time wake = absl::InfiniteFuture();
      bool poll_exits = false;
      for (auto& [key, s] : sessions_) {
        const bool room = s->window - (s->sent - s->acked) > 0;
        const bool input_waits = !s->input.empty() && s->fds.in >= 0;
        const bool terminal = s->fds.in >= 0 && s->fds.in == s->fds.out;
        // A terminal is one descriptor both ways: its events together.
        short out_events = static_cast<short>((room ? POLLIN : 0) | (input_waits && terminal ? POLLOUT : 0));
        if (s->fds.out >= 0 && out_events != 0) fds.push_back({s->fds.out, out_events, 0});
        if (room && s->fds.err >= 0) fds.push_back({s->fds.err, POLLIN, 0});
        if (input_waits && !terminal) fds.push_back({s->fds.in, POLLOUT, 0});
        if (!s->exited && s->pidfd >= 0) fds.push_back({s->pidfd, POLLIN, 0});
        if (!s->exited && s->pidfd < 0) poll_exits = true;
        wake = std::min(wake, s->kill_at);
      }
      if (!outbox_.empty() || !opens_.empty()) {
        timeout_ms = 0;
      } else if (wake != absl::InfiniteFuture() || poll_exits) {
        absl::Duration left = wake - absl::Now();
        if (poll_exits) left = std::min(left, absl::Milliseconds(100));
        timeout_ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left) + 1, 0, 1000));
      }
    }
    poll(fds.data(), fds.size(), timeout_ms);
    uint64_t drained;
    while (read(wake_fd_, &drained, sizeof(drained)) > 0) {
    }
    std::vector<ExecPiece> out;
    std::vector<EndCheck> checks;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      out.assign(std::make_move_iterator(outbox_.begin()), std::make_move_iterator(outbox_.end()));
      outbox_.clear();
      Service(absl::Now(), &out, &checks);
    }
    for (const EndCheck& c : checks) {
      absl::StatusOr<ExecTarget> now = resolve_(c.key);
      if (!now.ok() || now->attempt != c.attempt) out[c.piece].error = "the task's attempt ended";
    }
    for (const ExecPiece& piece : out) {
      if (sink_(piece) || piece.exited) continue;
      absl::MutexLock lock(&mu_);
      auto it = sessions_.find({piece.tag, piece.id});
      if (it != sessions_.end()) Stop(*it->second, "its output could not be sent", false, absl::Now());
    }
  }
}

}  // namespace trainyard::agent
