// Local login (docs/security.md, "Credentials"): on the server's host, a
// user gets a token by connecting to the server's login socket, which knows
// the caller's uid from the kernel (SO_PEERCRED) — no admin, no token file.
// The token is an HMAC of the account's name under the server's secret, so
// the server keeps nothing per user: "tyl_" + u|a + "_" + USER + "_" + 64 hex.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "security/principal.h"

namespace trainyard::security {

// The login token of `user` (an admin's when `admin`) under `secret`.
// REQUIRES: ValidateUserName(user) is OK.
std::string LoginToken(absl::string_view secret, absl::string_view user, bool admin);

// True when `token` has a login token's form (it may still be false).
bool IsLoginToken(absl::string_view token);

// The principal of a login token made under `secret`. Errors:
// Unauthenticated for a malformed or forged token.
absl::StatusOr<Principal> AuthenticateLoginToken(absl::string_view secret, absl::string_view token);

}  // namespace trainyard::security
