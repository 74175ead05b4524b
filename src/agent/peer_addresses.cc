// Peer address check before a task starts (see peer_addresses.h).
#include "agent/peer_addresses.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/node_address.h"

namespace trainyard::agent {

absl::Status CheckPeerAddresses(absl::string_view hosts_file, absl::string_view node) {
  std::set<std::string> seen;
  for (absl::string_view line : absl::StrSplit(hosts_file, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty() || !seen.insert(std::string(words[0])).second) continue;
    absl::Status st = api::CheckAddressResolves(words[0]);
    if (st.ok()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", words.size() > 1 ? words[1] : "?", "'s ", st.message(), " on node ", node,
        ": the job's tasks could not reach each other (that task's node needs an agent --address the other "
        "nodes resolve; docs/agent.md)"));
  }
  return absl::OkStatus();
}

}  // namespace trainyard::agent
