// Who made an HTTP request: the one seam where the API authenticates
// (docs/security.md). Every /api/ route needs a bearer token, the same
// tokens as the gRPC API ("Authorization: Bearer TOKEN"); without a valid
// one the answer is 401 with a JSON error that says what to do. The
// dashboard's static files, /healthz and /metrics are public: they hold no
// job's data beyond counts (the pages read everything else from /api/ with
// the token the user signed in with).
#pragma once

#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "security/principal.h"

namespace httplib {
struct Request;
}

namespace trainyard::server::http {

using Principal = security::Principal;

// Checks an "Authorization" header's value; nullptr: every request is an
// anonymous admin (a server without security, tests of the HTTP layer).
using Authenticator = std::function<absl::StatusOr<Principal>(absl::string_view authorization)>;

// True for the routes that need a token (route patterns under /api/).
bool NeedsToken(const std::string& route);

// The principal `req` speaks for on `route`: an anonymous principal on a
// public route; else `authenticate`'s answer for its Authorization header.
// Errors: Unauthenticated (answered 401).
absl::StatusOr<Principal> Authenticate(const httplib::Request& req, const std::string& route,
                                       const Authenticator& authenticate);

}  // namespace trainyard::server::http
