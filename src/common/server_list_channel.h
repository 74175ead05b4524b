// The gRPC side of server_list.h, for a client that makes short calls and
// long ones (the CLI, job masters): header-only, for code that links gRPC.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/statusor.h"
#include "common/server_list.h"

namespace trainyard {

// The target for `servers` with `args` set to follow the leader of a list:
// every address tried at once and calls sent to those connected
// (round_robin; only the leader listens; pick_first tried them in turn, so
// a leader that was paused or cut off, listed first, held each call for its
// whole connect timeout before the new leader was tried), one connection
// attempt given up after kServerListConnectTimeoutMs, and a ping on a call
// that lasts, so that a leader that went silent (paused or cut off: it
// answers nothing and closes nothing) ends it instead of holding it. The
// server allows a ping a second (server.cc, CommonListenerOptions). A
// single address, or a list that cannot be one target, is returned as it is
// with `args` untouched (the call then says what is wrong with it).
//
// A caller that makes a new channel after a call failed should do so only
// when the old one is not READY (ServerGone below): a live but slow server
// would otherwise have its connection thrown away while it is set up.
inline std::string ServerListChannelTarget(const std::string& servers, grpc::ChannelArguments* args) {
  absl::StatusOr<std::string> list = ServerListTarget(servers);
  if (!list.ok() || *list == servers) return servers;
  args->SetString(GRPC_ARG_DEFAULT_AUTHORITY, servers.substr(0, servers.find(',')));
  args->SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kServerListConnectTimeoutMs);
  args->SetLoadBalancingPolicyName("round_robin");
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kServerListKeepaliveMs);
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kServerListKeepaliveTimeoutMs);
  args->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Connections of its own: a channel made anew after a failover dials every
  // server at once, where gRPC's global pool would hand it the old
  // channel's connections and their backoff.
  args->SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return *list;
}

// True when a call's failure says its server may be gone (a failover) and
// `channel` is not connected now: a new channel is worth making. A server
// that answered UNAVAILABLE itself, or was slow on a live connection, keeps
// its channel.
inline bool ServerGone(const grpc::Status& status, grpc::Channel* channel) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return false;
  }
  return channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY;
}

}  // namespace trainyard
