// HttpServer: the server's HTTP endpoint (REST API, dashboard, /metrics):
// the generic endpoint of httpd/http_server.h (its threads, connection cap,
// deadlines and request counters) with the server's authentication on top:
// every handler is told who made the request (auth.h), and an /api/ request
// without a valid token is answered 401 before its handler runs. Requests
// with a valid token are the door's trusted ones: served first, with a
// share of the connections kept for them (httpd/http_server.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "httpd/http_server.h"
#include "security/credential_check.h"
#include "server/http/auth.h"

namespace trainyard::server::http {

using httpd::HttpRequestCount;
using httpd::SetJsonError;

struct HttpOptions : httpd::HttpOptions {
  // Checks the token of every /api/ request (auth.h); nullptr: none.
  Authenticator authenticate;
};

// The HTTP door's caps for a process with `open_file_limit` descriptors:
// max_connections an eighth of the limit, within 64..4096 (the gRPC
// listener takes most of the rest, server/connection_guard.h), and per
// peer an eighth of that; `requested_total` and `requested_per_peer`
// (0: not set) replace them, the per-peer cap never above the total.
struct HttpConnectionCaps {
  int max_connections = 0;
  int max_connections_per_peer = 0;
};
HttpConnectionCaps HttpConnectionCapsFor(int open_file_limit, int requested_total, int requested_per_peer);

class HttpServer final : public httpd::HttpServer {
 public:
  // A handler answers one request for `who` (Authenticate's principal).
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Principal& who)>;

  // As httpd::HttpServer::Bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Bind(HttpOptions options);

  // As httpd::HttpServer::Handle, after Authenticate: a request it refuses
  // is answered 401 (WWW-Authenticate: Bearer) without calling `handler`.
  void Handle(const std::string& method, const std::string& pattern, const std::string& route, Handler handler);
  // For a streamed answer to `req`: whether the token it came with still
  // holds (security/credential_check.h), checked again every few seconds.
  std::shared_ptr<security::CredentialCheck> CredentialCheckFor(const httplib::Request& req) const;

 private:
  explicit HttpServer(HttpOptions options)
      : httpd::HttpServer(WithTrust(options)), authenticate_(std::move(options.authenticate)) {}
  // `options` whose door serves first the requests whose token
  // `authenticate` accepts as a user's (not anonymous).
  static httpd::HttpOptions WithTrust(const HttpOptions& options);

  const Authenticator authenticate_;
};

}  // namespace trainyard::server::http
