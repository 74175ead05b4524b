// The agent door's address derived from the client door's.
#include "api/agent_address.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include <arpa/inet.h>
#include <vector>

namespace trainyard::api {

absl::StatusOr<std::string> DerivedAgentAddress(absl::string_view client) {
  if (absl::StartsWith(client, "unix:")) return absl::StrCat(client, ".agents");
  size_t colon = client.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || colon == 0 || !absl::SimpleAtoi(client.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", client, "' is not host:port"));
  }
  if (port == 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", client, "': the agent port is the one above it, and 65535 has none; name it"));
  }
  return absl::StrCat(client.substr(0, colon), ":", port == 0 ? 0 : port + 1);
}

absl::StatusOr<std::string> DerivedAgentAddresses(absl::string_view clients) {
  std::vector<std::string> out;
  for (absl::string_view client : absl::StrSplit(clients, ',')) {
    absl::StatusOr<std::string> agent = DerivedAgentAddress(client);
    if (!agent.ok()) return agent.status();
    out.push_back(*agent);
  }
  return absl::StrJoin(out, ",");
}

}  // namespace trainyard::api
