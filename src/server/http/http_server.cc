// The server's HTTP endpoint: authentication in front of every route (see
// http_server.h).
#include "server/http/http_server.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "httplib.h"

namespace trainyard::server::http {

HttpConnectionCaps HttpConnectionCapsFor(int open_file_limit, int requested_total, int requested_per_peer) {
  HttpConnectionCaps caps;
  caps.max_connections = requested_total > 0 ? requested_total : std::clamp(open_file_limit / 8, 64, 4096);
  caps.max_connections_per_peer = requested_per_peer > 0 ? std::min(requested_per_peer, caps.max_connections)
                                                         : std::max(1, caps.max_connections / 8);
  return caps;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Bind(HttpOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options)));
  if (absl::Status st = s->Open(); !st.ok()) return st;
  return s;
}

httpd::HttpOptions HttpServer::WithTrust(const HttpOptions& options) {
  httpd::HttpOptions o = options;
  if (options.authenticate && !o.trusted) {
    o.trusted = [authenticate = options.authenticate](absl::string_view authorization) {
      absl::StatusOr<Principal> who = authenticate(authorization);
      return who.ok() && !who->anonymous;
    };
  }
  return o;
}

void HttpServer::Handle(const std::string& method, const std::string& pattern, const std::string& route,
                        Handler handler) {
  httpd::HttpServer::Handle(
      method, pattern, route,
      [this, route, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Principal> who = Authenticate(req, route, authenticate_);
        if (!who.ok()) {
          SetJsonError(res, 401, std::string(who.status().message()));
          res.set_header("WWW-Authenticate", "Bearer");
          return;
        }
        handler(req, res, *who);
      });
}

std::shared_ptr<security::CredentialCheck> HttpServer::CredentialCheckFor(const httplib::Request& req) const {
  return std::make_shared<security::CredentialCheck>(authenticate_, req.get_header_value("Authorization"),
                                                     absl::Now());
}

}  // namespace trainyard::server::http
