// The rank host and its caller (see rank_host.h).
#include "jobmaster/client/rank_host.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace trainyard::jobmaster {
namespace {

constexpr uint32_t kMaxFrame = 1 << 20;

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, data, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool SendFrame(int fd, char kind, absl::string_view payload) {
  char head[5] = {kind};
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) head[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return WriteAll(fd, head, 5) && WriteAll(fd, payload.data(), payload.size());
}

// False on end of stream, an error or a frame above kMaxFrame.
bool ReadFrame(int fd, char* kind, std::string* payload) {
  unsigned char head[5];
  if (!ReadAll(fd, reinterpret_cast<char*>(head), 5)) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(head[1 + i]) << (8 * i);
  if (n > kMaxFrame) return false;
  *kind = static_cast<char>(head[0]);
  payload->resize(n);
  return n == 0 || ReadAll(fd, payload->data(), n);
}

bool SameSecret(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0 && !a.empty();
}

// Starts /bin/sh -c `command` with stdin from /dev/null and its stdout and
// stderr into *out / *err; -1 when it cannot.
pid_t StartCommand(const std::string& command, int* out, int* err) {
  int o[2], e[2];
  if (pipe2(o, O_CLOEXEC) != 0) return -1;
  if (pipe2(e, O_CLOEXEC) != 0) {
    close(o[0]);
    close(o[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(o[1], 1);
    dup2(e[1], 2);
    signal(SIGPIPE, SIG_DFL);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(o[1]);
  close(e[1]);
  *out = o[0];
  *err = e[0];
  if (pid < 0) {
    close(o[0]);
    close(e[0]);
  }
  return pid;
}

// Copies the command's output to the caller until both pipes end; stops the
// command when the caller goes away. Returns the command's exit status.
int Relay(int conn, pid_t pid, int out, int err) {
  bool caller_gone = false;
  while (out >= 0 || err >= 0) {
    pollfd fds[3] = {{out, POLLIN, 0}, {err, POLLIN, 0}, {caller_gone ? -1 : conn, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? out : err;
      if (fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fd);
        fd = -1;
      } else if (!caller_gone && !SendFrame(conn, i == 0 ? 'O' : 'E', absl::string_view(buf, n))) {
        caller_gone = true;
      }
    }
    if (!caller_gone && fds[2].revents != 0) caller_gone = true;  // the caller sends nothing after 'H'
    if (caller_gone) kill(pid, SIGTERM);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// Callers that have not yet shown the secret: each holds a thread for up to
// kHelloTimeout, so a stranger on the node's network may hold only so many.
constexpr int kMaxUnproven = 32;
constexpr timeval kHelloTimeout{10, 0};
std::atomic<int> g_unproven{0};

void ServeCaller(int conn, std::string peer, const std::string& secret) {
  std::string command;
  bool proven = ReadHello(conn, secret, &command);
  g_unproven.fetch_sub(1);
  if (!proven) {
    std::cerr << "trainyard rsh: refused " << peer << ": not this job's secret\n";
    SendFrame(conn, 'R', "refused: not this job's secret (TRAINYARD_JOB_SECRET)");
    close(conn);
    return;
  }
  int out = -1, err = -1;
  pid_t pid = StartCommand(command, &out, &err);
  if (pid < 0) {
    SendFrame(conn, 'R', absl::StrCat("cannot start /bin/sh: ", strerror(errno)));
    close(conn);
    return;
  }
  std::cerr << "trainyard rsh: running for " << peer << ": " << command << "\n";
  int code = Relay(conn, pid, out, err);
  SendFrame(conn, 'X', absl::StrCat(code));
  close(conn);
}

std::string PeerText(const sockaddr_storage& ss) {
  char host[NI_MAXHOST] = {0}, port[NI_MAXSERV] = {0};
  getnameinfo(reinterpret_cast<const sockaddr*>(&ss), sizeof(ss), host, sizeof(host), port, sizeof(port),
              NI_NUMERICHOST | NI_NUMERICSERV);
  return absl::StrCat(host, ":", port);
}

// A connected socket to host:port, or -1 (errno set).
int Connect(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      int saved = errno;
      close(fd);
      fd = -1;
      errno = saved;
    }
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

bool ReadHello(int conn, const std::string& secret, std::string* command) {
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &kHelloTimeout, sizeof(kHelloTimeout));
  char kind = 0;
  std::string hello;
  bool ok = ReadFrame(conn, &kind, &hello) && kind == 'H';
  size_t nl = ok ? hello.find('\n') : std::string::npos;
  if (nl == std::string::npos || !SameSecret(absl::string_view(hello).substr(0, nl), secret)) return false;
  timeval none{0, 0};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
  *command = hello.substr(nl + 1);
  return true;
}

absl::Status ServeRankHost(const RankHostOptions& options) {
  signal(SIGPIPE, SIG_IGN);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string where = absl::StrCat(options.address, ":", options.port);
  if (int rc = getaddrinfo(options.address.c_str(), absl::StrCat(options.port).c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", gai_strerror(rc)));
  }
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  bool ok = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 64) == 0;
  freeaddrinfo(found);
  if (!ok) return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", strerror(errno)));
  std::cerr << "trainyard rsh: rank host listening on " << where << std::endl;
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    int conn = accept4(fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) continue;
      return absl::UnavailableError(absl::StrCat("accept on ", where, ": ", strerror(errno)));
    }
    if (g_unproven.fetch_add(1) >= kMaxUnproven) {
      g_unproven.fetch_sub(1);
      close(conn);
      continue;
    }
    std::thread(ServeCaller, conn, PeerText(peer), options.secret).detach();
  }
}

absl::StatusOr<int> RankHostPort(absl::string_view rank_hosts, absl::string_view host) {
  for (absl::string_view line : absl::StrSplit(rank_hosts, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int port = 0;
    if (words.size() == 2 && words[0] == host && absl::SimpleAtoi(words[1], &port)) return port;
  }
  return absl::NotFoundError(
      absl::StrCat(host, " is not the address of a node of this job's MPI workers (TRAINYARD_MPI_RANK_HOSTS)"));
}

absl::StatusOr<int> RunOnRankHost(const std::string& host, int port, const std::string& secret,
                                  const std::vector<std::string>& command, absl::Duration connect_timeout) {
  signal(SIGPIPE, SIG_IGN);
  absl::Time deadline = absl::Now() + connect_timeout;
  int fd = Connect(host, port);
  for (absl::Duration wait = absl::Milliseconds(20); fd < 0 && absl::Now() < deadline;
       wait = std::min(wait * 2, absl::Seconds(1))) {
    absl::SleepFor(wait);  // the worker's rank host may still be starting
    fd = Connect(host, port);
  }
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("no rank host answers on ", host, ":", port, " (", strerror(errno),
                                               "): the job's worker there runs `trainyard rsh --serve`?"));
  }
  if (!SendFrame(fd, 'H', absl::StrCat(secret, "\n", absl::StrJoin(command, " ")))) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("the rank host on ", host, ":", port, " closed the connection"));
  }
  absl::StatusOr<int> code = ReadAnswer(fd, 1, 2);
  close(fd);
  if (code.ok()) return code;
  return absl::Status(code.status().code(),
                      absl::StrCat("the rank host on ", host, ":", port, " ", code.status().message()));
}

absl::StatusOr<int> ReadAnswer(int conn, int out_fd, int err_fd) {
  char kind = 0;
  std::string payload;
  while (ReadFrame(conn, &kind, &payload)) {
    if (kind == 'O' || kind == 'E') {
      WriteAll(kind == 'O' ? out_fd : err_fd, payload.data(), payload.size());
      continue;
    }
    int code = 0;
    if (kind == 'X' && absl::SimpleAtoi(payload, &code)) return code;
    if (kind == 'R') return absl::PermissionDeniedError(payload);
    return absl::UnavailableError("sent a frame that is not an answer");
  }
  return absl::UnavailableError("went away before the command ended");
}

}  // namespace trainyard::jobmaster
