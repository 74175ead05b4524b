// An HTTP endpoint's sockets, threads and limits (see http_server.h); the
// protocol itself is cpp-httplib's.
#include "httpd/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "httpd/connection.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace trainyard::httpd {
namespace {

// The route of the request this worker thread serves, for its counter
// (the library's logger, which sees every answer, runs on the same thread).
thread_local const std::string* tl_route = nullptr;
// The request answered on this thread left bytes of its own unread (a
// body above the cap, a malformed request): its connection ends after the
// answer rather than read them as the next request.
thread_local bool tl_close = false;
// The connection this worker thread serves (-1: none), for ClientGone.
thread_local int tl_fd = -1;

// Waits until `fd` is ready for `events` or `deadline` passes.
bool PollUntil(int fd, short events, absl::Time deadline) {
  while (true) {
    int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, INT_MAX)));
    if (r > 0) return true;  // ready, or hung up / failed: the next call says which
    if (r == 0 || errno != EINTR) return false;
  }
}

std::string IpOf(const sockaddr_storage& a, int* port) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    *port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    *port = ntohs(in->sin6_port);
  }
  return host;
}

// `accept` (an Accept-Encoding value) without brotli ("br", with or
// without a q-value).
std::string WithoutBrotli(const std::string& accept) {
  std::vector<std::string> kept;
  for (absl::string_view part : absl::StrSplit(accept, ',')) {
    absl::string_view coding = absl::StripAsciiWhitespace(part.substr(0, part.find(';')));
    if (!absl::EqualsIgnoreCase(coding, "br")) kept.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return absl::StrJoin(kept, ", ");
}

}  // namespace

// The library's server with its request processing (protected there) open
// to our connection loop; its own listen loop is never used.
class HttpServer::Engine final : public httplib::Server {
 public:
  using httplib::Server::process_request;
  // The library ends a streamed (chunked) answer when its listening socket
  // is gone. Its own listen loop is never used, so the socket it would
  // hold is ours: set while serving, unset to end the streams at Stop.
  void SetListening(int fd) { svr_sock_ = fd; }
};

// One request as the library reads it and its answer as the library writes
// it: reads come from the bytes the door received (the request is whole
// there; past them the stream ends), every write waits until
// request_timeout without progress.
class HttpServer::Stream final : public httplib::Stream {
 public:
  Stream(HttpConnection& c, const HttpOptions& options) : c_(c), options_(options) {}

  // Bytes of the connection's input the library has read.
  size_t consumed() const { return at_; }

  bool is_readable() const override { return at_ < c_.in.size(); }
  bool is_writable() const override { return PollUntil(c_.fd, POLLOUT, absl::Now() + options_.request_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, c_.in.size() - at_);
    memcpy(ptr, c_.in.data() + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    absl::Time deadline = absl::Now() + options_.request_timeout;
    if (c_.ssl != nullptr) {
      if (size == 0) return 0;
      while (true) {
        int r = SSL_write(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (r > 0) return r;
        if (!WaitTls(SSL_get_error(c_.ssl, r), deadline)) return -1;
      }
    }
    while (true) {
      ssize_t r = send(c_.fd, ptr, size, MSG_NOSIGNAL);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !PollUntil(c_.fd, POLLOUT, deadline)) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = -1;
    if (getpeername(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = IpOf(a, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = -1;
    if (getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = IpOf(a, &port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  // After a TLS call returned `err`: waits until `deadline` for what it
  // needs (to read or to write); false when it failed or time ran out.
  bool WaitTls(int err, absl::Time deadline) const {
    if (err == SSL_ERROR_WANT_READ) return PollUntil(c_.fd, POLLIN, deadline);
    if (err == SSL_ERROR_WANT_WRITE) return PollUntil(c_.fd, POLLOUT, deadline);
    return false;
  }

  HttpConnection& c_;
  const HttpOptions& options_;
  size_t at_ = 0;
};

void SetJsonError(httplib::Response& res, int status, const std::string& message) {
  nlohmann::json body = {{"error", {{"code", status}, {"message", message}}}};
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

namespace {
int Resolved(int asked, int otherwise) { return asked > 0 ? asked : otherwise; }
}  // namespace

HttpServer::HttpServer(HttpOptions options)
    : options_(std::move(options)),
      max_per_peer_(Resolved(options_.max_connections_per_peer, std::max(1, options_.max_connections / 8))),
      most_anonymous_(options_.trusted ? std::max(1, options_.max_connections -
                                                         Resolved(options_.trusted_reserve, options_.max_connections / 4))
                                       : INT_MAX),
      most_anonymous_serving_(options_.trusted ? std::max(1, options_.threads - 1) : INT_MAX),
      most_proxied_(std::max(1, options_.max_proxied)),
      engine_(std::make_unique<Engine>()),
      door_(std::make_unique<Door>()) {
  engine_->set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
  engine_->set_keep_alive_max_count(static_cast<size_t>(options_.keep_alive_requests));
  engine_->set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(options_.keep_alive)));
  engine_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    Count(req.method, tl_route ? *tl_route : "other", res.status);
    tl_close = res.status == 400 || res.status == 413 || res.status == 414;
  });
  // Answers the library makes itself (no such route, a malformed request,
  // a body above the cap) are JSON like ours; ours already have a body.
  engine_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string what = res.status == 404   ? "no such resource"
                       : res.status == 413 ? "the request body is above the most this server takes"
                                           : "the request cannot be served";
    SetJsonError(res, res.status, what);
    return httplib::Server::HandlerResponse::Handled;
  }));
  // The library answers a client that accepts brotli (every browser) with
  // brotli at its top quality, which takes seconds on the megabytes of JSON
  // of a large cluster's nodes or jobs; gzip (which it uses otherwise)
  // takes milliseconds. The request is the library's own, not const.
  engine_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    auto& headers = const_cast<httplib::Headers&>(req.headers);
    auto it = headers.find("Accept-Encoding");
    if (it != headers.end()) it->second = WithoutBrotli(it->second);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  engine_->set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    Log(LogLevel::kWarning, "http", "%s %s failed with an exception", req.method, req.path);
    SetJsonError(res, 500, "internal error");
  });
}

namespace {
// `listen` as host:port: a bare port is on 127.0.0.1.
std::string WithHost(const std::string& listen) {
  int port = 0;
  if (!listen.empty() && listen.find(':') == std::string::npos && absl::SimpleAtoi(listen, &port)) {
    return absl::StrCat("127.0.0.1:", listen);
  }
  return listen;
}
}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Bind(HttpOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options)));
  if (absl::Status st = s->Open(); !st.ok()) return st;
  return s;
}

absl::Status HttpServer::Open() {
  const std::string listen = WithHost(options_.listen);
  size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("http-listen: '", listen, "' is not host:port (or a port)"));
  }
  std::string host = listen.substr(0, colon);
  std::string bare = host.size() > 2 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(bare.empty() ? nullptr : bare.c_str(), absl::StrCat(port).c_str(), &hints, &found) != 0 || !found) {
    return absl::InvalidArgumentError(absl::StrCat("http-listen: cannot resolve '", host, "'"));
  }
  // Non-blocking: the door accepts until there is nothing more to take.
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  // Not SO_REUSEPORT: a second server on the same port must fail to bind.
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  bool ok = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, 128) == 0;
  freeaddrinfo(found);
  if (!ok) {
    std::string why = strerror(errno);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("http-listen: cannot bind ", listen, ": ", why));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  IpOf(bound, &port);
  listen_fd_ = fd;
  address_ = absl::StrCat(host, ":", port);
  if (pipe2(wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("http: cannot make a pipe: ", strerror(errno)));
  }
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
    tls_ = SSL_CTX_new(TLS_server_method());
    bool ok = tls_ != nullptr && SSL_CTX_set_min_proto_version(tls_, TLS1_2_VERSION) == 1 &&
              SSL_CTX_use_certificate_chain_file(tls_, options_.tls_cert_file.c_str()) == 1 &&
              SSL_CTX_use_PrivateKey_file(tls_, options_.tls_key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
              SSL_CTX_check_private_key(tls_) == 1;
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("http: cannot serve HTTPS with ", options_.tls_cert_file, " and ",
                                                     options_.tls_key_file, " (PEM certificate and its key)"));
    }
    SSL_CTX_set_mode(tls_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // Browsers keep sessions: this door hands out OpenSSL's usual two TLS
    // 1.3 tickets, which the `trainyard` binary's contexts otherwise leave
    // out (src/cli/main_tls_defaults.cc).
    SSL_CTX_set_num_tickets(tls_, 2);
  }
  return absl::OkStatus();
}

HttpServer::~HttpServer() {
  Stop();
  if (tls_ != nullptr) SSL_CTX_free(tls_);
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : wake_fd_) {
    if (fd >= 0) close(fd);
  }
}

void HttpServer::Handle(const std::string& method, const std::string& pattern, const std::string& route,
                        Handler handler) {
  auto wrapped = [route, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    tl_route = &route;
    handler(req, res);
  };
  if (method == "GET") engine_->Get(pattern, wrapped);
  else if (method == "POST") engine_->Post(pattern, wrapped);
  else if (method == "DELETE") engine_->Delete(pattern, wrapped);
  else if (method == "PUT") engine_->Put(pattern, wrapped);
  else if (method == "PATCH") engine_->Patch(pattern, wrapped);
  else if (method == "OPTIONS") engine_->Options(pattern, wrapped);
}

void HttpServer::Serve() {
  engine_->SetListening(listen_fd_);
  int workers = std::max(1, options_.threads) + std::max(0, options_.max_log_streams) +
                std::max(0, options_.max_watchers) + (options_.proxied_prefix.empty() ? 0 : most_proxied_);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { Work(); });
  door_thread_ = std::thread([this] { DoorLoop(); });
}

void HttpServer::Stop() {
  engine_->SetListening(-1);  // streams end at their next step
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Workers blocked on a client wake up to a closed socket.
    for (int fd : serving_) shutdown(fd, SHUT_RDWR);
    cv_.SignalAll();
  }
  if (wake_fd_[1] >= 0) {
    ssize_t n = write(wake_fd_[1], "x", 1);
    (void)n;  // the pipe holds a byte already when this fails: the door wakes either way
  }
  if (door_thread_.joinable()) door_thread_.join();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  absl::MutexLock lock(&mu_);
  ready_trusted_.clear();  // closes them
  ready_anonymous_.clear();
  ready_proxied_.clear();
  returned_.clear();
}

void HttpServer::Work() {
  while (true) {
    std::unique_ptr<HttpConnection> c;
    {
      absl::MutexLock lock(&mu_);
      auto anonymous = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !ready_anonymous_.empty() && anonymous_serving_ < most_anonymous_serving_;
      };
      auto proxied = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !ready_proxied_.empty() && proxied_serving_ < most_proxied_;
      };
      while (!stopping_ && ready_trusted_.empty() && !anonymous() && !proxied()) cv_.Wait(&mu_);
      if (stopping_) return;
      std::deque<std::unique_ptr<HttpConnection>>& from =
          !ready_trusted_.empty() ? ready_trusted_ : anonymous() ? ready_anonymous_ : ready_proxied_;
      c = std::move(from.front());
      from.pop_front();
      if (c->proxied) {
        ++proxied_serving_;
      } else if (!c->trusted) {
        ++anonymous_serving_;
      }
      serving_.insert(c->fd);
    }
    bool keep = ServeRequest(*c);
    tl_fd = -1;
    absl::MutexLock lock(&mu_);
    // Out of serving_ before the door may close it, so Stop never shuts
    // down a descriptor number that was given to something else.
    serving_.erase(c->fd);
    if (c->proxied) {
      if (--proxied_serving_ < most_proxied_ && !ready_proxied_.empty()) cv_.Signal();
    } else if (!c->trusted && --anonymous_serving_ < most_anonymous_serving_ && !ready_anonymous_.empty()) {
      cv_.Signal();
    }
    returned_.emplace_back(std::move(c), keep && !stopping_);
    ssize_t n = write(wake_fd_[1], "x", 1);
    (void)n;  // the pipe is full: the door is awake already and takes it
  }
}

bool HttpServer::ServeRequest(HttpConnection& c) {
  tl_fd = c.fd;
  Stream stream(c, options_);
  bool last = ++c.served >= options_.keep_alive_requests;
  {
    absl::MutexLock lock(&mu_);
    last = last || stopping_;
  }
  tl_route = nullptr;
  tl_close = false;
  bool closed = false;
  bool ok = engine_->process_request(stream, last, closed, nullptr);
  tl_route = nullptr;
  c.in.erase(0, stream.consumed());
  if (ok && !closed && !last && !tl_close) return true;
  if (c.ssl != nullptr) SSL_shutdown(c.ssl);  // one try: the close follows either way
  // Unread input (a body above the cap): let the answer reach the client.
  if (tl_close) LingeringClose(c.fd);
  return false;
}

void HttpServer::LingeringClose(int fd) {
  // Closing a socket with unread input sends a reset, which can destroy the
  // answer before the client reads it (a 413 to a client still sending its
  // body). So: end our side, then read and drop what the client still
  // sends, for a bounded time and amount, before the close.
  shutdown(fd, SHUT_WR);
  absl::Time deadline = absl::Now() + absl::Seconds(1);
  int64_t left = 4 * options_.max_body_bytes + (1 << 20);
  char buf[16384];
  while (left > 0 && PollUntil(fd, POLLIN, deadline)) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) return;
    left -= std::max<ssize_t>(n, 0);
  }
}

std::shared_ptr<void> HttpServer::TryStream(StreamKind kind) {
  absl::MutexLock lock(&mu_);
  int* held = kind == StreamKind::kLog ? &log_streams_ : &watchers_;
  int most = kind == StreamKind::kLog ? options_.max_log_streams : options_.max_watchers;
  if (stopping_ || *held >= most) return nullptr;
  ++*held;
  // Released on the worker thread when the answer is done (its provider,
  // which holds the pointer, goes with the response), before Stop joins it.
  return std::shared_ptr<void>(held, [this](int* n) {
    absl::MutexLock lock(&mu_);
    --*n;
  });
}

bool HttpServer::ClientGone() {
  if (tl_fd < 0) return false;
  pollfd p{tl_fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

void HttpServer::NoCompression(const httplib::Request& req) {
  // The request is the library's own object, not a constant: its
  // Accept-Encoding is what decides the answer's encoding after the handler.
  const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
}

void HttpServer::Count(const std::string& method, const std::string& route, int code) {
  absl::MutexLock lock(&counts_mu_);
  ++counts_[std::make_tuple(method, route, code)];
}

HttpConnectionStats HttpServer::ConnectionStats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::vector<HttpRequestCount> HttpServer::RequestCounts() const {
  std::vector<HttpRequestCount> out;
  absl::MutexLock lock(&counts_mu_);
  for (const auto& [key, n] : counts_) out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), n});
  return out;
}

}  // namespace trainyard::httpd
