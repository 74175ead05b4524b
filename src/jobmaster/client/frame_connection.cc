// FrameConnection: blocking framed I/O with deadlines over one TCP socket.
#include "jobmaster/client/frame_connection.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "jobmaster/frame.h"

namespace trainyard::jobmaster {
namespace {

int PollMillis(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 1 << 30));
}

// One connect attempt; returns the fd or -1 with errno-based text in *error.
int ConnectOnce(const HostPort& hp, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    *error = absl::StrFormat("cannot resolve '%s': %s", hp.host, gai_strerror(rc));
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    *error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  size_t colon = text.rfind(':');
  HostPort hp;
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(std::string(text.substr(colon + 1)), &hp.port) || hp.port <= 0 || hp.port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job master address '%s' is not host:port (e.g. 10.0.0.5:31000)", text));
  }
  hp.host = std::string(text.substr(0, colon));
  return hp;
}

absl::Status StatusFromErrorReply(const pb::ErrorReply& error) {
  int code = error.code();
  if (code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), error.message());
}

absl::StatusOr<std::unique_ptr<FrameConnection>> FrameConnection::Connect(
    std::string_view address, absl::Time deadline) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  absl::Duration backoff = absl::Milliseconds(20);
  while (true) {
    std::string error;
    int fd = ConnectOnce(*hp, &error);
    if (fd >= 0) return std::unique_ptr<FrameConnection>(new FrameConnection(fd, std::string(address)));
    if (absl::Now() + backoff > deadline) {
      return absl::UnavailableError(
          absl::StrFormat("cannot reach the job master at %s: %s", address, error));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(backoff));  // retry pacing
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

FrameConnection::~FrameConnection() { close(fd_); }

void FrameConnection::Shutdown() { shutdown(fd_, SHUT_RDWR); }

absl::Status FrameConnection::Send(const pb::JobMasterRequest& request) {
  std::string frame;
  AppendFrame(request, &frame);
  absl::MutexLock lock(&write_mu_);
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrFormat("lost the connection to the job master at %s: %s",
                                                    address_, std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::JobMasterResponse> FrameConnection::Receive(absl::Time deadline) {
  while (true) {
    FrameView frame;
    absl::Status s = PeekFrame(in_, kMaxResponseBytes, &frame);
    if (!s.ok()) return absl::DataLossError(absl::StrFormat("job master at %s: %s", address_, s.message()));
    if (frame.complete) {
      pb::JobMasterResponse response;
      bool parsed = response.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()));
      in_.erase(0, frame.consumed);
      if (!parsed) return absl::DataLossError(absl::StrFormat("job master at %s sent a frame that is not a JobMasterResponse", address_));
      return response;
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, PollMillis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return absl::DeadlineExceededError("no answer from the job master in time");
    char buf[64 * 1024];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrFormat(
          "lost the connection to the job master at %s%s", address_,
          n == 0 ? " (closed by the master)" : std::string(": ") + std::strerror(errno)));
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<pb::JobMasterResponse> FrameConnection::Call(const pb::JobMasterRequest& request,
                                                            absl::Time deadline) {
  if (absl::Status s = Send(request); !s.ok()) return s;
  while (true) {
    absl::StatusOr<pb::JobMasterResponse> response = Receive(deadline);
    if (!response.ok()) return response.status();
    if (response->has_error() && (response->request_id() == request.request_id() ||
                                  response->request_id() == 0)) {
      return StatusFromErrorReply(response->error());
    }
    if (response->request_id() == request.request_id()) return response;
  }
}

}  // namespace trainyard::jobmaster
