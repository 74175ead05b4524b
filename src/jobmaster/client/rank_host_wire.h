// The rank host's wire (rank_host.h): frames, and the handshake by which a
// caller and a rank host each prove to the other that they hold the job's
// secret without sending it.
//
// Frames are a kind byte, a little-endian u32 length and the payload. A
// connection goes:
//   host   'C' host nonce (32 random bytes)
//   caller 'H' caller nonce (32 bytes) || HMAC-SHA256(secret, host nonce ||
//              caller nonce || COMMAND) || COMMAND
//   host   'A' HMAC-SHA256(secret, caller nonce || host nonce), or 'R' (why
//              refused) and the end
//   host   'O' / 'E' (COMMAND's stdout / stderr bytes) ..., then 'X' (its
//              exit status in decimal)
// The secret never crosses the wire; the host's fresh nonce makes a recorded
// hello worthless on another connection, and the MAC binds the command to
// it. The caller's nonce makes the host's proof fresh, so a process that
// took the port first (another user's task on the node) learns neither the
// secret nor anything it could replay, and the caller trusts no output from
// it. The two MACs cannot stand for each other: the caller's covers 64 bytes
// and a command of at least one, the host's exactly 64.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace trainyard::jobmaster {

inline constexpr size_t kRankHostNonceBytes = 32;

// kRankHostNonceBytes fresh random bytes (OpenSSL's RAND_bytes); Internal
// when the generator fails.
absl::StatusOr<std::string> RankHostNonce();

// The rank host's side of a connection's handshake: sends `host_nonce`,
// reads the caller's hello until `deadline` (one deadline for the whole
// hello, however the caller paces its bytes) and, when its MAC shows
// `secret`, sends the host's proof and returns the command. A wrong MAC is
// answered 'R' ("refused: not this job's secret") and is PermissionDenied;
// DeadlineExceeded past `deadline`; InvalidArgument for anything else (end
// of stream, another frame, a malformed or empty hello, a frame above 1 MiB).
// REQUIRES: `secret` is not empty; `host_nonce` is kRankHostNonceBytes long.
absl::StatusOr<std::string> AcceptCaller(int conn, absl::string_view secret, absl::string_view host_nonce,
                                         absl::Time deadline);

// The caller's side: reads the host's nonce until `deadline`, sends the
// hello for `command` with `caller_nonce` and checks the host's proof. OK
// once the host has shown it holds `secret` (its answer frames follow:
// ReadAnswer); PermissionDenied with the host's reason for a refusal;
// Unauthenticated when the other side does not prove the secret (it is not
// this job's rank host); DeadlineExceeded or Unavailable when it says
// nothing in time or goes away. REQUIRES: `command` is not empty;
// `caller_nonce` is kRankHostNonceBytes long.
absl::Status GreetRankHost(int conn, absl::string_view secret, absl::string_view command,
                           absl::string_view caller_nonce, absl::Time deadline);

// Reads the rank host's answer frames from `conn` until its exit status,
// copying 'O' and 'E' bytes to `out_fd` and `err_fd`; the status, or an error
// for a refusal ('R'), another frame or an early end. What a caller runs
// after GreetRankHost.
absl::StatusOr<int> ReadAnswer(int conn, int out_fd, int err_fd);

// Sends one frame on socket `fd` (no SIGPIPE); false when the peer is gone.
bool SendFrame(int fd, char kind, absl::string_view payload);

}  // namespace trainyard::jobmaster
