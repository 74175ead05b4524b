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

// The answer to a connection above max_connections: sent without waiting
// (the socket is non-blocking; a client that does not read loses it).
void Refuse(int fd) {
  static const std::string kBody =
      R"({"error":{"code":503,"message":"the server has too many HTTP connections open; try again"}})";
  static const std::string kAnswer =
      absl::StrCat("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: ",
                   kBody.size(), "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n", kBody);
  ssize_t n = send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n;  // nothing to do about a client that cannot take it: it is closed either way
  shutdown(fd, SHUT_WR);
  close(fd);
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

// One connection as the library reads and writes it: every read waits at
// most until the request's deadline and stops at its byte budget, every
// write until request_timeout without progress.
class HttpServer::Stream final : public httplib::Stream {
 public:
  // `ssl`: the connection's TLS session (handshake done), or null for HTTP.
  Stream(int fd, const HttpOptions& options, SSL* ssl) : fd_(fd), options_(options), ssl_(ssl) {}

  void StartRequest() {
    deadline_ = absl::Now() + options_.request_timeout;
    budget_ = options_.max_header_bytes + options_.max_body_bytes;
    header_bytes_ = 0;
    line_start_ = false;
    headers_done_ = false;
  }
  bool WaitReadable(absl::Duration d) const { return Buffered() || PollUntil(fd_, POLLIN, absl::Now() + d); }

  bool is_readable() const override { return Buffered() || PollUntil(fd_, POLLIN, deadline_); }
  bool is_writable() const override { return PollUntil(fd_, POLLOUT, absl::Now() + options_.request_timeout); }

  // The library reads a request's lines a byte at a time: they come from a
  // buffer, not a system call each.
  ssize_t read(char* ptr, size_t size) override {
    if (budget_ <= 0) return -1;  // a request larger than any we take
    if (!Buffered()) {
      ssize_t r = Fill();
      if (r <= 0) return r;
    }
    size_t n = std::min({size, static_cast<size_t>(budget_), buffer_end_ - buffer_at_});
    memcpy(ptr, buffer_ + buffer_at_, n);
    buffer_at_ += n;
    budget_ -= static_cast<int64_t>(n);
    return CountHeader(ptr, static_cast<ssize_t>(n)) ? static_cast<ssize_t>(n) : -1;
  }

  ssize_t write(const char* ptr, size_t size) override {
    absl::Time deadline = absl::Now() + options_.request_timeout;
    if (ssl_ != nullptr) {
      if (size == 0) return 0;
      while (true) {
        int r = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (r > 0) return r;
        if (!WaitTls(SSL_get_error(ssl_, r), deadline)) return -1;
      }
    }
    while (true) {
      ssize_t r = send(fd_, ptr, size, MSG_NOSIGNAL);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !PollUntil(fd_, POLLOUT, deadline)) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = -1;
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = IpOf(a, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = -1;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = IpOf(a, &port);
  }
  socket_t socket() const override { return fd_; }

 private:
  bool Buffered() const { return buffer_at_ < buffer_end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }
  // After a TLS call returned `err`: waits until `deadline` for what it
  // needs (to read or to write); false when it failed or time ran out.
  bool WaitTls(int err, absl::Time deadline) const {
    if (err == SSL_ERROR_WANT_READ) return PollUntil(fd_, POLLIN, deadline);
    if (err == SSL_ERROR_WANT_WRITE) return PollUntil(fd_, POLLOUT, deadline);
    return false;
  }
  // Reads what the socket has into the empty buffer, waiting for it until
  // the request's deadline: bytes read, 0 at the end, -1 on error or time out.
  ssize_t Fill() {
    while (ssl_ != nullptr) {
      int r = SSL_read(ssl_, buffer_, sizeof(buffer_));
      if (r > 0) {
        buffer_at_ = 0;
        buffer_end_ = static_cast<size_t>(r);
        return r;
      }
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_ZERO_RETURN) return 0;
      if (!WaitTls(err, deadline_)) return -1;
    }
    while (true) {
      ssize_t r = recv(fd_, buffer_, sizeof(buffer_), 0);
      if (r >= 0) {
        buffer_at_ = 0;
        buffer_end_ = static_cast<size_t>(r);
        return r;
      }
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !PollUntil(fd_, POLLIN, deadline_)) return -1;
    }
  }
  // Follows the request's headers to their end (an empty line, CRLF or a
  // bare LF); false once they are above max_header_bytes.
  bool CountHeader(const char* data, ssize_t n) {
    for (ssize_t i = 0; i < n && !headers_done_; ++i) {
      ++header_bytes_;
      char c = data[i];
      if (c == '\n') {
        headers_done_ = line_start_;
        line_start_ = true;
      } else if (c != '\r') {
        line_start_ = false;
      }
    }
    return headers_done_ || header_bytes_ <= options_.max_header_bytes;
  }

  const int fd_;
  const HttpOptions& options_;
  SSL* const ssl_;
  absl::Time deadline_ = absl::InfiniteFuture();
  int64_t budget_ = 0;
  int64_t header_bytes_ = 0;
  bool line_start_ = false;   // nothing but '\r' read since the last '\n'
  bool headers_done_ = false;
  char buffer_[4096];
  size_t buffer_at_ = 0;
  size_t buffer_end_ = 0;
};

void SetJsonError(httplib::Response& res, int status, const std::string& message) {
  nlohmann::json body = {{"error", {{"code", status}, {"message", message}}}};
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

HttpServer::HttpServer(HttpOptions options) : options_(std::move(options)), engine_(std::make_unique<Engine>()) {
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
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
}

void HttpServer::Serve() {
  engine_->SetListening(listen_fd_);
  int workers = std::max(1, options_.threads) + std::max(0, options_.max_log_streams) + std::max(0, options_.max_watchers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { Work(); });
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

void HttpServer::Stop() {
  engine_->SetListening(-1);  // streams end at their next step
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Workers blocked on a client wake up to a closed socket.
    for (int fd : serving_) shutdown(fd, SHUT_RDWR);
    for (int fd : waiting_) close(fd);
    waiting_.clear();
    cv_.SignalAll();
  }
  if (wake_fd_[1] >= 0) {
    ssize_t n = write(wake_fd_[1], "x", 1);
    (void)n;  // the pipe holds a byte already when this fails: the loop wakes either way
  }
  if (acceptor_.joinable()) acceptor_.join();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void HttpServer::AcceptLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
  absl::Time last_warning = absl::InfinitePast();
  while (true) {
    int r = poll(fds, 2, -1);
    if (r < 0 && errno != EINTR) break;
    if (fds[1].revents) break;  // Stop
    if (r <= 0 || !(fds[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Admit(fd);
      continue;
    }
    // A connection that went away before it was taken, or a signal: go on.
    // Out of descriptors or memory: wait a little for some to be freed
    // rather than spin, and say so now and then.
    if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EPROTO) continue;
    if (absl::Now() - last_warning > absl::Seconds(10)) {
      Log(LogLevel::kWarning, "http", "accept: %s; new connections wait", strerror(errno));
      last_warning = absl::Now();
    }
    poll(&fds[1], 1, 50);
    if (fds[1].revents) break;
  }
}

void HttpServer::Admit(int fd) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_ && static_cast<int>(serving_.size() + waiting_.size()) < options_.max_connections) {
      waiting_.push_back(fd);
      cv_.Signal();
      return;
    }
  }
  if (tls_ != nullptr) {
    close(fd);  // an answer would need a handshake: the client sees the close
    return;
  }
  Refuse(fd);
}

void HttpServer::Work() {
  while (true) {
    int fd = -1;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && waiting_.empty()) cv_.Wait(&mu_);
      if (stopping_) return;
      fd = waiting_.front();
      waiting_.pop_front();
      serving_.insert(fd);
    }
    bool linger = ServeConnection(fd);
    tl_fd = -1;
    if (linger) LingeringClose(fd);
    {
      // Out of serving_ before it is closed, so Stop never shuts down a
      // descriptor number that was given to something else.
      absl::MutexLock lock(&mu_);
      serving_.erase(fd);
    }
    close(fd);
  }
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

namespace {
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
}  // namespace

bool HttpServer::ServeConnection(int fd) {
  tl_fd = fd;
  std::unique_ptr<SSL, SslFree> ssl;
  if (tls_ != nullptr) {
    // The handshake, within the time a request gets; a client that does not
    // speak TLS (or trusts another CA) ends here, with nothing served.
    ssl.reset(SSL_new(tls_));
    if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return false;
    absl::Time deadline = absl::Now() + options_.request_timeout;
    while (true) {
      int r = SSL_accept(ssl.get());
      if (r == 1) break;
      int err = SSL_get_error(ssl.get(), r);
      bool waited = err == SSL_ERROR_WANT_READ    ? PollUntil(fd, POLLIN, deadline)
                    : err == SSL_ERROR_WANT_WRITE ? PollUntil(fd, POLLOUT, deadline)
                                                  : false;
      if (!waited) return false;
    }
  }
  bool linger = ServeTls(fd, ssl.get());
  if (ssl) SSL_shutdown(ssl.get());  // one try: the close follows either way
  return linger;
}

bool HttpServer::ServeTls(int fd, SSL* ssl) {
  Stream stream(fd, options_, ssl);
  for (int n = 0; n < options_.keep_alive_requests; ++n) {
    if (n == 0 ? !stream.WaitReadable(options_.request_timeout) : !AwaitNextRequest(stream)) return n == 0;
    bool last = n + 1 == options_.keep_alive_requests;
    {
      absl::MutexLock lock(&mu_);
      last = last || stopping_;
    }
    stream.StartRequest();
    tl_route = nullptr;
    tl_close = false;
    bool closed = false;
    bool ok = engine_->process_request(stream, last, closed, nullptr);
    tl_route = nullptr;
    if (!ok || closed || last || tl_close) return true;
  }
  return true;
}

// An idle kept-alive connection holds a worker thread. A browser keeps
// several open and polls on them, which would pin every thread while a
// new connection waits: so it gives the thread up as soon as another
// connection waits for one (the browser sends its next request anew).
bool HttpServer::AwaitNextRequest(const Stream& stream) {
  absl::Time deadline = absl::Now() + options_.keep_alive;
  for (absl::Time now = absl::Now(); now < deadline; now = absl::Now()) {
    if (stream.WaitReadable(std::min(absl::Milliseconds(20), deadline - now))) return true;
    absl::MutexLock lock(&mu_);
    if (stopping_ || !waiting_.empty()) return false;
  }
  return false;
}

void HttpServer::ServeConnectionForTest(int fd) {
  ServeConnection(fd);
  tl_fd = -1;
}

void HttpServer::Count(const std::string& method, const std::string& route, int code) {
  absl::MutexLock lock(&counts_mu_);
  ++counts_[std::make_tuple(method, route, code)];
}

std::vector<HttpRequestCount> HttpServer::RequestCounts() const {
  std::vector<HttpRequestCount> out;
  absl::MutexLock lock(&counts_mu_);
  for (const auto& [key, n] : counts_) out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), n});
  return out;
}

}  // namespace trainyard::httpd
