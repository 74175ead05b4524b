// Who made an HTTP request: the one seam where the API authenticates.
//
// Security has not landed yet, so this is OPEN: every request is the same
// anonymous principal with every right, and whoever can reach the HTTP
// address can read the cluster, submit and kill any job — with the default
// loopback address, every user and process of the server's machine; with a
// non-loopback --http-listen, everyone on the network. The security work
// fills Authenticate in (bearer token or client certificate, checked
// against the cluster's CA) and the handlers already pass what it returns
// to their checks.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace httplib {
struct Request;
}

namespace trainyard::server::http {

struct Principal {
  std::string user;       // "" while security is off: anyone
  bool admin = false;     // may act on every job
  bool anonymous = true;  // no credential was checked
};

// The principal `req` speaks for. Errors: Unauthenticated (answered 401)
// once credentials are checked; never while security is off.
absl::StatusOr<Principal> Authenticate(const httplib::Request& req);

}  // namespace trainyard::server::http
