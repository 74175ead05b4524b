// The authentication seam (see auth.h).
#include "server/http/auth.h"

#include "httplib.h"

namespace trainyard::server::http {

bool NeedsToken(const std::string& route) { return route.rfind("/api/", 0) == 0; }

absl::StatusOr<Principal> Authenticate(const httplib::Request& req, const std::string& route,
                                       const Authenticator& authenticate) {
  if (!authenticate) return Principal{.user = "", .admin = true, .anonymous = true};
  if (!NeedsToken(route)) return Principal{.user = "", .admin = false, .anonymous = true};
  return authenticate(req.get_header_value("Authorization"));
}

}  // namespace trainyard::server::http
