// HttpServer: an HTTP endpoint of a Trainyard daemon (the server's REST
// API, dashboard and /metrics; an agent's /metrics), built on cpp-httplib
// (Debian's libcpp-httplib-dev) for the protocol: request parsing, routing
// and responses are the library's.
// What a daemon facing strangers needs around it is ours, because the
// library's own listen loop has none of it. Its door: one thread accepts
// and reads every connection without blocking (TLS handshakes included) and
// hands a request to a worker thread only once it has come whole
// (request_frame.h), so a client that sends slowly holds a descriptor and a
// buffer, never a thread; between requests a kept-alive connection goes
// back to the door. The door bounds what a stranger can hold: open
// connections in all and per peer address (one over the peer's cap is
// answered 503 and closed), a deadline for a request's head and one for its
// body (408 and closed), an idle timeout between requests, a byte cap on
// head and body, a timeout on every write. When every connection is taken
// a new one still gets in: the door closes an idle connection, else the
// oldest one still sending its request, so a flood of connections that
// never finish cannot keep anyone out. Requests that came with a token the
// `trusted` check accepts are served before the others, a share of the
// connections is kept for them, and anonymous requests never take every
// worker. The gRPC API and the control state do not share these threads,
// so a stuck HTTP client never stalls them.
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
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib
struct ssl_ctx_st;
struct ssl_st;

namespace trainyard::httpd {

struct HttpConnection;

struct HttpOptions {
  // host:port; port 0 = any free port; a bare port (no host) is on
  // 127.0.0.1, so nothing is exposed beyond the host unless a host is named.
  std::string listen = "127.0.0.1:0";
  int threads = 4;                     // requests served at once
  // Open connections in all (being read, served or idle). When all are
  // taken, a new one takes the place of an idle connection or of the
  // oldest one still sending its request; with none of those it is
  // answered 503 and closed.
  int max_connections = 128;
  // Open connections from one peer address (an IPv6 peer is its /64); one
  // more is answered 503 and closed. 0: max_connections / 8 (at least 1).
  int max_connections_per_peer = 0;
  // Connections only requests with a trusted token hold: anonymous requests
  // waiting for or in service take at most max_connections minus this (one
  // more is answered 503), so the rest are always idle or still sending
  // (and make room) or trusted. 0: max_connections / 4. Without a `trusted`
  // check nobody is trusted and nothing is kept.
  int trusted_reserve = 0;
  // A request's head (request line and header fields, after the TLS
  // handshake on a new connection) must come whole within header_timeout of
  // its first byte (of the connection's opening, for the first request);
  // its body within body_timeout of the head's end. Past either the
  // connection is answered 408 and closed.
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(30);
  // Each write of an answer must make progress within this.
  absl::Duration request_timeout = absl::Seconds(10);
  absl::Duration keep_alive = absl::Seconds(5);  // an idle connection is closed after
  int keep_alive_requests = 100;                  // requests on one connection
  int64_t max_header_bytes = 64 << 10;
  int64_t max_body_bytes = 4 << 20;
  // Answers that stream: followed logs and log archives, and watchers
  // (server-sent events). Each has a worker of its own.
  int max_log_streams = 8;
  int max_watchers = 32;
  // Requests whose target starts with `proxied_prefix` ("" = none) are
  // passed on to another server and wait for its answer (the server's
  // service proxy): they queue apart, token or not, at most `max_proxied`
  // (at least 1) are served at once, and as many workers are added for
  // them, so a slow service never takes the threads the other requests
  // need; one more waiting than `max_proxied` is answered 503.
  std::string proxied_prefix;
  int max_proxied = 16;
  // HTTPS: the server's certificate (PEM, its chain) and key. Both empty:
  // plain HTTP. The handshake must finish within request_timeout.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Whether a request's Authorization value is a token worth serving
  // first (a user's, not anonymous). Called on the door's thread for each
  // request that has one, so it must be quick. nullptr: nobody is.
  std::function<bool(absl::string_view authorization)> trusted;
};

// What the door has done with connections since Serve (/metrics).
struct HttpConnectionStats {
  int64_t open = 0;                 // open connections now
  int64_t accepted = 0;             // admitted, in all
  int64_t refused_peer_cap = 0;     // answered 503: the peer's cap was reached
  int64_t refused_total_cap = 0;    // answered 503: all taken, none could make room
  int64_t refused_anonymous = 0;    // answered 503: anonymous requests hold their share
  int64_t refused_proxied = 0;      // answered 503: as many proxied requests wait as may be served
  int64_t evicted_idle = 0;         // idle, closed to make room for a new one
  int64_t evicted_unfinished = 0;   // still sending its request, closed to make room
  int64_t header_timeouts = 0;      // closed: the head did not come in time
  int64_t body_timeouts = 0;        // closed: the body did not come in time
  int64_t idle_timeouts = 0;        // closed: idle for keep_alive
  int64_t trusted_requests = 0;     // requests served first, for their token
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

  // Registers `handler` for `method` (GET, POST, PUT, PATCH, DELETE,
  // OPTIONS; a GET route answers HEAD too) on `pattern` (a
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

  // host:port bound (never port 0).
  const std::string& address() const { return address_; }
  std::vector<HttpRequestCount> RequestCounts() const ABSL_LOCKS_EXCLUDED(counts_mu_);
  HttpConnectionStats ConnectionStats() const ABSL_LOCKS_EXCLUDED(mu_);

 protected:
  explicit HttpServer(HttpOptions options);
  // Binds the listening socket (Bind's work, for a class that adds to this one).
  absl::Status Open();

 private:
  class Engine;
  class Stream;
  struct Door;

  // The door's thread (http_door.cc): accepts, reads, times out and hands
  // whole requests to the workers. The functions that take a descriptor
  // find its connection among those the door holds.
  void DoorLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void AcceptAll() ABSL_LOCKS_EXCLUDED(mu_);
  void Admit(std::unique_ptr<HttpConnection> c) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes a connection to make room for a new one; false when none may go.
  bool Evict() ABSL_LOCKS_EXCLUDED(mu_);
  void OnReady(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads what the client has sent; false when it has gone (or failed).
  bool ReadInto(HttpConnection& c);
  // Frames the request as far as it has come; hands it over when whole.
  void Advance(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  void Hand(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  void TakeBack() ABSL_LOCKS_EXCLUDED(mu_);
  void Expire(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  std::unique_ptr<HttpConnection> TakeHeld(int fd);
  // Answers `status` with a JSON error (without waiting) and closes.
  void AnswerAndClose(std::unique_ptr<HttpConnection> c, int status, const std::string& message)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CloseConnection(std::unique_ptr<HttpConnection> c) ABSL_LOCKS_EXCLUDED(mu_);
  void Bump(int64_t HttpConnectionStats::*counter) ABSL_LOCKS_EXCLUDED(mu_);

  void Work() ABSL_LOCKS_EXCLUDED(mu_);
  // Serves the whole request at the front of `c`'s input; false when the
  // connection must close after it.
  bool ServeRequest(HttpConnection& c) ABSL_LOCKS_EXCLUDED(mu_);
  void LingeringClose(int fd);
  void Count(const std::string& method, const std::string& route, int code) ABSL_LOCKS_EXCLUDED(counts_mu_);

  const HttpOptions options_;
  const int max_per_peer_;           // options_.max_connections_per_peer, resolved
  const int most_anonymous_;         // anonymous requests waiting or in service
  const int most_anonymous_serving_;  // anonymous requests in service
  const int most_proxied_;            // proxied requests in service, and waiting (each)
  std::unique_ptr<Engine> engine_;
  ssl_ctx_st* tls_ = nullptr;  // HTTPS when set (an OpenSSL SSL_CTX)
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // a byte on [1] wakes the door (a connection back, or Stop)
  std::string address_;
  std::unique_ptr<Door> door_;  // the door thread's own state
  std::thread door_thread_;
  std::vector<std::thread> workers_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  // Whole requests waiting for a worker: trusted ones are taken first.
  std::deque<std::unique_ptr<HttpConnection>> ready_trusted_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<HttpConnection>> ready_anonymous_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<HttpConnection>> ready_proxied_ ABSL_GUARDED_BY(mu_);
  int anonymous_serving_ ABSL_GUARDED_BY(mu_) = 0;
  // Served, back to the door: to keep (true) or to close.
  std::vector<std::pair<std::unique_ptr<HttpConnection>, bool>> returned_ ABSL_GUARDED_BY(mu_);
  std::set<int> serving_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int log_streams_ ABSL_GUARDED_BY(mu_) = 0;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
  int proxied_serving_ ABSL_GUARDED_BY(mu_) = 0;
  HttpConnectionStats stats_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex counts_mu_;
  std::map<std::tuple<std::string, std::string, int>, int64_t> counts_ ABSL_GUARDED_BY(counts_mu_);
};

// Sets `res` to a JSON error {"error": {"code": status, "message": ...}}.
void SetJsonError(httplib::Response& res, int status, const std::string& message);

}  // namespace trainyard::httpd
