// Join tokens (docs/security.md, "Join tokens"): a short-lived, single-use
// secret that lets one named node get its certificate from the server, so
// the CA's key never leaves the server's host. Only each token's SHA-256 is
// kept, in DATA_DIR/join-tokens (0600), one line per token:
//   SHA256 NODE EXPIRES_UNIX_MS USED(0|1)
// Not thread-safe: the server calls it under one lock.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainyard::security {

// DATA_DIR/join-tokens.
std::string JoinTokenFilePath(const std::string& data_dir);

// A new token ("tyj_" + 64 hex digits) for `node`, usable once until
// now + ttl. Errors: a node name a certificate cannot carry, a ttl that is
// not positive, a file that cannot be written.
absl::StatusOr<std::string> IssueJoinToken(const std::string& path, const std::string& node, absl::Duration ttl,
                                           absl::Time now);

// What RedeemJoinToken would answer for `token` and `node` at `now`,
// without marking the token used: the server checks a join with it before
// it touches the CA's key, and redeems only once the certificate is made
// (under the same lock), so a malformed request does not use a token up.
absl::Status CheckJoinToken(const std::string& path, const std::string& token, const std::string& node,
                            absl::Time now);

// Takes `token` for `node`: PermissionDenied when it is unknown, for another
// node, expired or used already (each said); else marks it used.
absl::Status RedeemJoinToken(const std::string& path, const std::string& token, const std::string& node,
                             absl::Time now);

}  // namespace trainyard::security
