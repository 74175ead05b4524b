// Where agents reach the server: its agent door (a listener of its own for
// the agents' streams, docs/control-plane.md) is, unless configured
// otherwise, the port above its client port on the same host. One rule,
// used by the server to bind it and by agents started with only --server to
// find it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainyard::api {

// The agent address that goes with the client address `client`:
// "host:7450" -> "host:7451", "[::1]:7450" -> "[::1]:7451", port 0 (any)
// stays 0, "unix:PATH" -> "unix:PATH.agents". InvalidArgument naming
// `client` when it has no port, or port 65535 (none above).
absl::StatusOr<std::string> DerivedAgentAddress(absl::string_view client);

// DerivedAgentAddress of each address of a comma-separated list.
absl::StatusOr<std::string> DerivedAgentAddresses(absl::string_view clients);

}  // namespace trainyard::api
