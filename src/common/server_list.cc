#include "common/server_list.h"

#include <arpa/inet.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace trainyard {

namespace {

// "ipv4" or "ipv6" for an entry IP:port ([IPv6]:port); else an error naming
// the list and the entry.
absl::StatusOr<std::string> FamilyOf(absl::string_view servers, absl::string_view server) {
  size_t colon = server.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(server.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("server list '", servers, "': '", server, "' is not host:port"));
  }
  std::string host(server.substr(0, colon));
  unsigned char buf[16];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) return std::string("ipv4");
  if (host.size() > 2 && host.front() == '[' && host.back() == ']' &&
      inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1) {
    return std::string("ipv6");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "server list '", servers, "': '", host,
      "' is not an IP address (a list names servers by address; or give one name that resolves to all)"));
}

}  // namespace

absl::StatusOr<std::string> CheckServerList(absl::string_view servers) {
  std::string family;
  for (absl::string_view server : absl::StrSplit(servers, ',')) {
    absl::StatusOr<std::string> kind = FamilyOf(servers, server);
    if (!kind.ok()) return kind.status();
    if (!family.empty() && family != *kind) {
      return absl::InvalidArgumentError(absl::StrCat("server list '", servers, "' mixes IPv4 and IPv6"));
    }
    family = *kind;
  }
  return family;
}

absl::StatusOr<std::string> ServerListTarget(absl::string_view servers) {
  if (!absl::StrContains(servers, ',')) return std::string(servers);
  absl::StatusOr<std::string> family = CheckServerList(servers);
  if (!family.ok()) return family.status();
  return absl::StrCat(*family, ":", servers);
}

namespace {

// "host:port" with an IP address written as inet_ntop writes it (so
// "[FD00:0::1]:7451" and "[fd00::1]:7451" are one); anything else as it is.
std::string CanonicalAddress(absl::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return std::string(address);
  std::string host(address.substr(0, colon));
  absl::string_view port = address.substr(colon + 1);
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1 && inet_ntop(AF_INET, buf, text, sizeof(text)) != nullptr) {
    return absl::StrCat(text, ":", port);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']' &&
      inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1 &&
      inet_ntop(AF_INET6, buf, text, sizeof(text)) != nullptr) {
    return absl::StrCat("[", text, "]:", port);
  }
  return std::string(address);
}

}  // namespace

std::string ServerListWithLast(absl::string_view servers, absl::string_view last) {
  if (last.empty() || !absl::StrContains(servers, ',')) return std::string(servers);
  const std::string wanted = CanonicalAddress(last);
  std::vector<absl::string_view> first, after;
  for (absl::string_view server : absl::StrSplit(servers, ',')) {
    (CanonicalAddress(server) == wanted ? after : first).push_back(server);
  }
  first.insert(first.end(), after.begin(), after.end());
  return absl::StrJoin(first, ",");
}

}  // namespace trainyard
