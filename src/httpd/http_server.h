// HttpServer: an HTTP endpoint of a Trainyard daemon (the server's REST
// API, dashboard and /metrics; an agent's /metrics), built on cpp-httplib
// (Debian's libcpp-httplib-dev) for the protocol: request parsing, routing
// and responses are the library's.
// What a daemon facing strangers needs around it is ours, because the
// library's own listen loop has none of it: a bounded number of threads and
// of open connections (one more is answered 503 at once and closed, so a
// flood cannot take the server's file descriptors), a deadline to receive a
// whole request and a byte cap on it (a client dripping bytes, or sending
// headers without end, is cut off), a timeout on every write, and an accept
// loop that goes on after a failed accept. The gRPC API and the control
// state do not share its threads, so a stuck HTTP client never stalls them.
//
// Long answers (a followed log, a log archive, a watch stream) hold their
// worker thread while they last. They take a slot first (TryStream): the
// workers are `threads` for requests plus one per stream slot, so streams
// never take the threads that short requests need, and a stream beyond its
// kind's slots is answered 503 at once.
//
// Nothing here knows who a caller is: the server's HTTP API adds its
// bearer tokens on top (server/http/http_server.h).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib
struct ssl_ctx_st;
struct ssl_st;

namespace trainyard::httpd {

struct HttpOptions {
  // host:port; port 0 = any free port; a bare port (no host) is on
  // 127.0.0.1, so nothing is exposed beyond the host unless a host is named.
  std::string listen = "127.0.0.1:0";
  int threads = 4;                     // requests served at once
  // Open connections, served or waiting for a thread; one more is answered
  // 503 and closed.
  int max_connections = 128;
  // To receive one request whole (headers and body), and for each write of
  // an answer to make progress.
  absl::Duration request_timeout = absl::Seconds(10);
  absl::Duration keep_alive = absl::Seconds(5);  // an idle connection is closed after
  int keep_alive_requests = 100;                  // requests on one connection
  int64_t max_header_bytes = 64 << 10;
  int64_t max_body_bytes = 4 << 20;
  // Answers that stream: followed logs and log archives, and watchers
  // (server-sent events). Each has a worker of its own.
  int max_log_streams = 8;
  int max_watchers = 32;
  // HTTPS: the server's certificate (PEM, its chain) and key. Both empty:
  // plain HTTP. The handshake must finish within request_timeout.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// One counter of answered requests (trainyard_http_requests_total).
struct HttpRequestCount {
  std::string method;  // GET, POST, ...
  std::string route;   // the route's pattern, e.g. /api/v1/jobs/{job}; "other" when none matched
  int code = 0;
  int64_t count = 0;
};

class HttpServer {
 public:
  // A handler answers one request.
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Binds `options.listen`; serves nothing until Serve. Errors name the
  // address (in use, not an address of this machine, malformed), as the
  // flag `http-listen`.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Bind(HttpOptions options);
  virtual ~HttpServer();

  // Registers `handler` for `method` (GET, POST, DELETE) on `pattern` (a
  // regex over the path; groups are in req.matches); `route` names it in
  // the request counters. REQUIRES: before Serve.
  void Handle(const std::string& method, const std::string& pattern, const std::string& route, Handler handler);
  // Starts the accept thread and the workers.
  void Serve();

  enum class StreamKind { kLog, kWatch };
  // A slot for a streaming answer of `kind`, held until the pointer (kept
  // by the answer's content provider) is released; nullptr when all of that
  // kind are taken (answer 503).
  std::shared_ptr<void> TryStream(StreamKind kind) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the client of the request this thread serves has closed its
  // connection (or the server is stopping): a stream that waits for
  // something to send looks now and then, since only a write would
  // otherwise notice.
  static bool ClientGone();
  // The answer to `req` goes out uncompressed even if the client accepts
  // gzip: the library's compressor holds back a stream's small pieces
  // (a followed log's lines) until it has a block.
  static void NoCompression(const httplib::Request& req);
  // Stops accepting, cuts open connections, joins every thread. Idempotent.
  void Stop();

  // Serves the requests a client sends on the connected socket `fd` on the
  // calling thread, as a worker serves an accepted connection (the same
  // reads, byte caps, parsing, routes and answers), until the connection
  // ends; the caller closes `fd`. For the fuzzer (fuzz/http_entry.cc), which
  // sends raw bytes through a socket pair to a server that never Serve()s.
  void ServeConnectionForTest(int fd);

  // host:port bound (never port 0).
  const std::string& address() const { return address_; }
  std::vector<HttpRequestCount> RequestCounts() const ABSL_LOCKS_EXCLUDED(counts_mu_);

 protected:
  explicit HttpServer(HttpOptions options);
  // Binds the listening socket (Bind's work, for a class that adds to this one).
  absl::Status Open();

 private:
  class Engine;
  class Stream;

  void AcceptLoop();
  void Admit(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  void Work() ABSL_LOCKS_EXCLUDED(mu_);
  // Serves `fd`'s requests; false when it ends idle between requests (no
  // unread input, so no lingering close).
  bool ServeConnection(int fd);
  // ServeConnection's requests, over `ssl` when not null.
  bool ServeTls(int fd, ssl_st* ssl);
  bool AwaitNextRequest(const Stream& stream) ABSL_LOCKS_EXCLUDED(mu_);
  void LingeringClose(int fd);
  void Count(const std::string& method, const std::string& route, int code) ABSL_LOCKS_EXCLUDED(counts_mu_);

  const HttpOptions options_;
  std::unique_ptr<Engine> engine_;
  ssl_ctx_st* tls_ = nullptr;  // HTTPS when set (an OpenSSL SSL_CTX)
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // a byte on [1] wakes the accept loop to stop
  std::string address_;
  std::thread acceptor_;
  std::vector<std::thread> workers_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<int> waiting_ ABSL_GUARDED_BY(mu_);  // accepted, not yet served
  std::set<int> serving_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int log_streams_ ABSL_GUARDED_BY(mu_) = 0;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;

  mutable absl::Mutex counts_mu_;
  std::map<std::tuple<std::string, std::string, int>, int64_t> counts_ ABSL_GUARDED_BY(counts_mu_);
};

// Sets `res` to a JSON error {"error": {"code": status, "message": ...}}.
void SetJsonError(httplib::Response& res, int status, const std::string& message);

}  // namespace trainyard::httpd
