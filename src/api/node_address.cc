// Node addresses: an agent's default and the resolution check (see
// node_address.h).
#include "api/node_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainyard::api {
namespace {

// A getaddrinfo answer, freed on scope exit.
struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

// "host:port" / "[v6]:port" split; false when there is no port.
bool SplitHostPort(absl::string_view hp, std::string* host, std::string* port) {
  size_t colon = hp.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == hp.size()) return false;
  absl::string_view h = hp.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  *host = std::string(h);
  *port = std::string(hp.substr(colon + 1));
  int n = 0;
  return absl::SimpleAtoi(*port, &n) && n > 0 && n < 65536;
}

std::string AddressText(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

absl::StatusOr<std::string> LocalAddressToward(absl::string_view server) {
  std::string host, port;
  if (!SplitHostPort(server, &host, &port)) {
    return absl::InvalidArgumentError(absl::StrCat("'", server, "' is not host:port"));
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  AddrInfo found;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found.list); rc != 0) {
    return absl::UnavailableError(absl::StrCat("server '", host, "' does not resolve: ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* a = found.list; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    bool ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
              getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    if (!ok) last_error = strerror(errno);
    close(fd);
    if (ok) return AddressText(local);
  }
  return absl::UnavailableError(absl::StrCat("no route to server '", host, "': ", last_error));
}

absl::Status CheckAddressResolves(absl::string_view address) {
  if (address.empty()) return absl::InvalidArgumentError("the address is empty");
  std::string host(address);
  in6_addr scratch;
  if (inet_pton(AF_INET, host.c_str(), &scratch) == 1 || inet_pton(AF_INET6, host.c_str(), &scratch) == 1) {
    return absl::OkStatus();
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  AddrInfo found;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found.list); rc != 0) {
    return absl::NotFoundError(absl::StrCat("address '", host, "' does not resolve (", gai_strerror(rc), ")"));
  }
  return absl::OkStatus();
}

}  // namespace trainyard::api
