// An agent's join with a join token (docs/security.md, "Join tokens"): the
// cluster CA fetched over TLS without verification, taken only when its
// SHA-256 matches the pin; then, verified with it, the token exchanged for
// the node's certificate, whose key is made here and never leaves the node.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace trainyard::cli {

struct JoinOptions {
  std::string server;  // host:port
  std::string node;
  std::string token;   // tyj_...
  std::string ca_pin;  // sha256:HEX of the CA's certificate
  // Where the CA, the certificate and the key are written (0644, 0644,
  // 0600; directories made 0700).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Joins as `options.node`. Errors: a CA that does not match the pin
// (nothing is sent to that server), a token the server refuses (said as it
// says it), a server that cannot be reached, a file that cannot be written.
absl::Status JoinCluster(const JoinOptions& options);

}  // namespace trainyard::cli
