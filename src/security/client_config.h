// The client config file, like a kubeconfig (docs/security.md): the
// server's address and the user's token, so the CLI needs neither on every
// call.
//
//   server: 127.0.0.1:7450
//   token: ty_5f0c...
//   caFile: /path/to/ca.crt   # the server serves TLS: verify it with this CA
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainyard::security {

struct ClientConfig {
  std::string server;  // host:port; "" when the file does not say
  std::string token;   // "" when the file does not say
  // The CA certificate the server's must be signed by (TLS); a relative path
  // is taken from the file's directory. "" = the server is plaintext.
  std::string ca_file;
  std::string path;    // where it was read from; "" when no file was found
};

// Parses the file at `path`. Errors name the path and the key.
absl::StatusOr<ClientConfig> LoadClientConfig(const std::string& path);

// The config the CLI uses: the file $TRAINYARD_CONFIG names (which must
// exist), else .trainyard/client.yaml in the working directory (what
// `trainyard up` writes), else ~/.config/trainyard/client.yaml; an empty
// config when there is none.
absl::StatusOr<ClientConfig> FindClientConfig();

// Writes `config` to `path` (0600; its directory 0700 when made).
absl::Status WriteClientConfig(const std::string& path, const ClientConfig& config);

}  // namespace trainyard::security
