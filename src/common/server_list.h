// Several servers of one cluster, one of which serves (the leader on an
// etcd store), as one gRPC target: the rules agents, the CLI and job
// masters share to find the leader and follow it through a failover.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainyard {

// Several servers of one cluster (an etcd store: one leads, the standbys do
// not listen): "10.0.0.1:7450,10.0.0.2:7450" is one gRPC target over every
// address. With pick_first (agents) it tries them in order and stays on the
// first that answers; with round_robin (the CLI) it tries them all at once
// and sends calls to those connected. Either way a client or agent finds the
// leader and, when it dies, the next one. A single
// address is returned as it is. InvalidArgument when a list holds a host
// name (give one name that resolves to every server instead) or mixes IPv4
// and IPv6.
absl::StatusOr<std::string> ServerListTarget(absl::string_view servers);
// Every entry of `servers` (one or more, comma-separated) is IP:port, all
// IPv4 or all [IPv6]: "ipv4" or "ipv6"; else InvalidArgument naming the
// entry. What a server accepts as --cluster-servers.
absl::StatusOr<std::string> CheckServerList(absl::string_view servers);
// With a list, one connection attempt to a server gives up after this long
// (gRPC's GRPC_ARG_MIN_RECONNECT_BACKOFF_MS; 20 s by default), so a server
// whose host is cut off or paused (its SYN or handshake never answered)
// delays the move to the next one by at most this much.
inline constexpr int kServerListConnectTimeoutMs = 3000;
// With a list, an agent (and the CLI, on a call that lasts) pings its
// server this often and leaves it when a ping goes unanswered this long: a
// leader that is paused or cut off neither answers nor closes. So an agent
// on a leader that went silent notices within their sum, and a new leader
// waits that much longer than the node timeout for it (ControlState::CheckNodes).
inline constexpr int kServerListKeepaliveMs = 2000;
inline constexpr int kServerListKeepaliveTimeoutMs = 3000;

// `servers` (a comma-separated list) with the entries equal to `last` moved
// to its end, the others in their order: the order an agent dials in once
// the server it had reached at `last` went silent. As it is when `last` is
// "" or not in it.
std::string ServerListWithLast(absl::string_view servers, absl::string_view last);

}  // namespace trainyard
