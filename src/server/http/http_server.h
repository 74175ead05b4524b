// HttpServer: the server's HTTP endpoint (REST API, dashboard, /metrics):
// the generic endpoint of httpd/http_server.h (its threads, connection cap,
// deadlines and request counters) with the server's authentication on top:
// every handler is told who made the request (auth.h), and an /api/ request
// without a valid token is answered 401 before its handler runs.
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
      : httpd::HttpServer(options), authenticate_(std::move(options.authenticate)) {}

  const Authenticator authenticate_;
};

}  // namespace trainyard::server::http
