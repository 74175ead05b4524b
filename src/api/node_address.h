// What a node's address is (the host or IP other nodes' tasks reach it on:
// MASTER_ADDR, TF_CONFIG, the MPI hostfile and the hosts file carry it), and
// the two checks made of it: an agent's default, which other hosts can reach,
// and whether an address resolves. One rule for the agent, which picks and
// checks the addresses of a task's peers, and the server, which checks a
// node's at registration.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainyard::api {

// The local address this host reaches `server` ("host:port", "[v6]:port")
// from: the source address the kernel picks for a connection to it (a
// datagram socket is connected, which sends nothing, and named). An agent
// without --address takes it: the address other hosts reached it from is the
// one they can reach it on, unlike its host name, which their resolver may
// not know. Unavailable naming `server` when it does not resolve or has no
// route; InvalidArgument when it is not host:port (a unix: address has no
// network address: the caller keeps its own).
absl::StatusOr<std::string> LocalAddressToward(absl::string_view server);

// OK when `address` (a host name or IP literal) resolves here; otherwise
// NotFound saying that `address` does not resolve, with the resolver's words.
// An IP literal is checked without asking a resolver. REQUIRES: nothing; an
// empty address is InvalidArgument.
absl::Status CheckAddressResolves(absl::string_view address);

}  // namespace trainyard::api
