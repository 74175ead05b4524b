// The server's HTTP endpoint: authentication in front of every route (see
// http_server.h).
#include "server/http/http_server.h"

#include "absl/time/clock.h"
#include "httplib.h"

namespace trainyard::server::http {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Bind(HttpOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options)));
  if (absl::Status st = s->Open(); !st.ok()) return st;
  return s;
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
