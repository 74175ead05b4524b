// The rank host and its caller (see rank_host.h).
#include "jobmaster/client/rank_host.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "jobmaster/client/rank_host_command.h"
#include "jobmaster/client/rank_host_wire.h"

namespace trainyard::jobmaster {
namespace {

// Callers that have not yet proven the secret: each holds a thread for up
// to kHelloTimeout, so a stranger on the node's network may hold only so
// many.
constexpr int kMaxUnproven = 32;
constexpr absl::Duration kHelloTimeout = absl::Seconds(10);
std::atomic<int> g_unproven{0};

void ServeCaller(int conn, std::string peer, const std::string& secret) {
  absl::StatusOr<std::string> nonce = RankHostNonce();
  absl::StatusOr<std::string> command =
      nonce.ok() ? AcceptCaller(conn, secret, *nonce, absl::Now() + kHelloTimeout) : nonce.status();
  g_unproven.fetch_sub(1);
  if (!command.ok()) {
    std::cerr << "trainyard rsh: refused " << peer << ": " << command.status().message() << "\n";
    close(conn);
    return;
  }
  absl::StatusOr<RankCommand> started = StartRankCommand(*command);
  if (!started.ok()) {
    SendFrame(conn, 'R', started.status().message());  // refused either way if the caller is gone
    close(conn);
    return;
  }
  std::cerr << "trainyard rsh: running for " << peer << ": " << *command << "\n";
  int code = RelayRankCommand(conn, *started);
  std::cerr << "trainyard rsh: ended for " << peer << " (exit status " << code << "): " << *command << "\n";
  SendFrame(conn, 'X', absl::StrCat(code));  // a caller gone meanwhile has no use for it
  close(conn);
}

// Blocks the signals that stop the rank host in every thread but one, which
// stops the commands' groups before the process exits: they are in groups
// of their own, which a signal to the task's group does not reach.
void StopCommandsOnSignal() {
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::thread([stop] {
    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    std::cerr << "trainyard rsh: stopping (signal " << sig << "); its commands first" << std::endl;
    StopRankCommands();
    _exit(128 + sig);
  }).detach();
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
  StopCommandsOnSignal();
  std::cerr << "trainyard rsh: rank host listening on " << where << std::endl;
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    int conn = accept4(fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: the pending connection stays queued
        // and the socket readable, so wait for running commands to end some.
        poll(nullptr, 0, 100);
        continue;
      }
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
  if (secret.empty()) return absl::FailedPreconditionError("no job secret (TRAINYARD_JOB_SECRET is not set)");
  absl::StatusOr<std::string> nonce = RankHostNonce();
  if (!nonce.ok()) return nonce.status();
  signal(SIGPIPE, SIG_IGN);  // a closed stdout loses output, not the exit status
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
  absl::Status greeted =
      GreetRankHost(fd, secret, absl::StrJoin(command, " "), *nonce, absl::Now() + kHelloTimeout);
  absl::StatusOr<int> code = greeted.ok() ? ReadAnswer(fd, 1, 2) : absl::StatusOr<int>(greeted);
  close(fd);
  if (code.ok()) return code;
  return absl::Status(code.status().code(),
                      absl::StrCat("the rank host on ", host, ":", port, " ", code.status().message()));
}

}  // namespace trainyard::jobmaster
