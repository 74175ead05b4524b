// MasterOrders (see master_orders.h): the blocking socket work on its own
// threads.
#include "server/master_orders.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace trainyard::server {
namespace {

// The most bytes of an answer read: the order the master holds.
constexpr uint32_t kMaxAnswerBytes = 64 * 1024;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or `deadline` passes.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::DeadlineExceededError("no answer in time");
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, static_cast<int>(ms));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return absl::UnavailableError(absl::StrCat("poll: ", strerror(errno)));
  }
}

absl::Status WriteAll(int fd, const std::string& bytes, absl::Time deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (absl::Status s = WaitFor(fd, POLLOUT, deadline); !s.ok()) return s;
    } else {
      return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, char* out, size_t size, absl::Time deadline) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = recv(fd, out + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError("the master closed the connection");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (absl::Status s = WaitFor(fd, POLLIN, deadline); !s.ok()) return s;
    } else {
      return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// `refused` says whether the master's port refused (it may be starting).
absl::StatusOr<int> ConnectOnce(const std::string& address, absl::Time deadline, bool* refused) {
  *refused = false;
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_INET;  // masters listen on IPv4 (jobmaster_server.cc)
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  }
  int rc = connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    *refused = err == ECONNREFUSED;
    return absl::UnavailableError(absl::StrCat("connect: ", strerror(err)));
  }
  if (rc != 0) {
    if (absl::Status s = WaitFor(fd, POLLOUT, deadline); !s.ok()) {
      close(fd);
      return s;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      close(fd);
      *refused = err == ECONNREFUSED;
      return absl::UnavailableError(absl::StrCat("connect: ", strerror(err)));
    }
  }
  return fd;
}

// A master that is starting (its task launched, its port not yet open)
// refuses: it is tried again every 50 ms until the deadline.
absl::StatusOr<int> Connect(const std::string& address, absl::Time deadline) {
  while (true) {
    bool refused = false;
    absl::StatusOr<int> fd = ConnectOnce(address, deadline, &refused);
    if (fd.ok() || !refused || absl::Now() + absl::Milliseconds(50) >= deadline) return fd;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

std::string Framed(const std::string& body) {
  uint32_t n = htonl(static_cast<uint32_t>(body.size()));
  std::string out(reinterpret_cast<const char*>(&n), 4);
  out += body;
  return out;
}

}  // namespace

MasterOrders::~MasterOrders() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void MasterOrders::Push(std::string address, v1::ServerOrder order) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (queue_.size() >= kMaxQueued) {
    ++failed_;
    queue_.pop_front();
  }
  queue_.push_back(Queued{std::move(address), std::move(order), absl::Now()});
  if (!started_) {
    started_ = true;
    for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this] { Run(); });
  }
}

size_t MasterOrders::delivered() const {
  absl::MutexLock lock(&mu_);
  return delivered_;
}

size_t MasterOrders::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

void MasterOrders::Run() {
  while (true) {
    Queued next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](MasterOrders* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (stopping_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      // Waited longer than the master's report interval: the report has
      // brought it by now (pushes held up behind unreachable masters).
      if (absl::Now() - next.queued > kStale) {
        ++failed_;
        continue;
      }
    }
    absl::Status s = Deliver(next.address, next.order);
    if (!s.ok()) {
      Log(LogLevel::kInfo, "server", "job %s: the order to checkpoint could not be pushed to its master at %s (%s); "
          "the master hears of it at its next report", next.order.job(), next.address, s.message());
    }
    absl::MutexLock lock(&mu_);
    ++(s.ok() ? delivered_ : failed_);
  }
}

absl::Status MasterOrders::Deliver(const std::string& address, const v1::ServerOrder& order) const {
  absl::Time deadline = absl::Now() + timeout_;
  absl::StatusOr<int> fd = Connect(address, deadline);
  if (!fd.ok()) return fd.status();
  Fd owned(*fd);
  v1::JobMasterRequest req;
  req.set_request_id(1);
  *req.mutable_server_order() = order;
  if (absl::Status s = WriteAll(owned.get(), Framed(req.SerializeAsString()), deadline); !s.ok()) return s;
  // Answers to other requests never come on this connection: the first
  // frame is ours.
  char header[4];
  if (absl::Status s = ReadAll(owned.get(), header, 4, deadline); !s.ok()) return s;
  uint32_t n = 0;
  std::memcpy(&n, header, 4);
  n = ntohl(n);
  if (n > kMaxAnswerBytes) return absl::InvalidArgumentError(absl::StrCat("an answer of ", n, " bytes"));
  std::string body(n, '\0');
  if (absl::Status s = ReadAll(owned.get(), body.data(), n, deadline); !s.ok()) return s;
  v1::JobMasterResponse resp;
  if (!resp.ParseFromString(body)) return absl::InvalidArgumentError("an answer that is not a JobMasterResponse");
  if (resp.has_error()) {
    return absl::Status(static_cast<absl::StatusCode>(resp.error().code()), resp.error().message());
  }
  if (resp.checkpoint().id() < order.order().id()) {
    return absl::InternalError(absl::StrCat("the master holds order ", resp.checkpoint().id(), ", not ",
                                            order.order().id()));
  }
  return absl::OkStatus();
}

}  // namespace trainyard::server
