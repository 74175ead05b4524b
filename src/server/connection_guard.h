// The server's guard on incoming connections: a cap on open connections in
// all and per peer address for each of its gRPC doors (the client listener
// and the agent listener, each with caps of its own, so a flood at one door
// never takes a place at the other), kept below the file-descriptor limit;
// a connection that has not authenticated is the first to go when a cap is
// reached; and a listener that keeps accepting after the process ran out of
// descriptors.
//
// Why it sits under gRPC rather than in it: the gRPC of Debian 12 (1.51) has
// no connection cap, and its listener stops for good after one accept that
// fails with EMFILE ("accept4: Too many open files"), so a connection flood
// locked out every client and reconnecting agent until a restart. The
// server's process defines `accept4` and `close` itself (exported to the
// shared libraries, see src/server/CMakeLists.txt); while the guard is
// installed they count connections by door and peer (each peer address
// counted on its own, never in a bucket shared with others), close at once what is
// over a cap (or, when one is there, shut down the oldest connection that
// has not authenticated within its grace and admit the new one instead), and
// on EMFILE free a reserved descriptor to accept and drop the waiting
// connection, so the listener never sees the error. Without Install() both
// are plain system calls.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace trainyard::server {

// The server's gRPC listeners, each guarded with caps of its own.
enum class Door : int {
  kClients = 0,  // the CLI, the dashboard's backends, job masters (--listen)
  kAgents = 1,   // node agents' streams only (--agent-listen)
};
inline constexpr int kDoors = 2;

struct ConnectionGuardOptions {
  int port = 0;  // the guarded listener's local port (-1: Unix sockets); others' accepts pass through
  int max_connections = 0;           // open connections accepted, all peers together
  int max_connections_per_peer = 0;  // from one IP address (Unix-socket peers: no per-peer cap)
  Door door = Door::kClients;
  // A TCP connection not marked authenticated (MarkAuthenticated) within
  // this many ms of its accept may be shut down to make room for a new one
  // when a cap is reached, oldest first; 0: never. Unix-socket peers count
  // as authenticated (the kernel's file permissions let them in).
  int unauthenticated_grace_ms = 0;
};

// What the guard has done since Install(), for /metrics and the logs.
struct ConnectionGuardStats {
  int64_t open = 0;                 // accepted connections still open
  int64_t accepted = 0;             // admitted, in all
  int64_t refused_total_cap = 0;    // closed at once: max_connections reached
  int64_t refused_peer_cap = 0;     // closed at once: the peer's cap reached
  int64_t refused_no_fd = 0;        // closed at once: the process had no descriptor left
  int64_t evicted_unauthenticated = 0;  // shut down for a newcomer: not authenticated within the grace
};

class ConnectionGuard {
 public:
  // Turns the guard on for `options.door`: the listeners of this process
  // bound to `options.port` (a gRPC port; the HTTP listener has caps of its
  // own). Opens the reserved descriptor. May be called again to change the
  // caps. REQUIRES: the port and both caps positive; the doors' ports differ.
  static void Install(const ConnectionGuardOptions& options);
  // Back to plain system calls (tests), every door. Connections stay
  // counted until closed.
  static void UninstallForTest();
  static ConnectionGuardStats Stats(Door door = Door::kClients);
  // Marks the open connection of `door` whose peer is `grpc_peer` (gRPC's
  // ServerContext::peer(): "ipv4:1.2.3.4:5678", "ipv6:[::1]:5678") as
  // authenticated: it is never shut down for a newcomer. Called on each
  // authenticated call; unknown or already marked peers cost one lookup.
  static void MarkAuthenticated(Door door, absl::string_view grpc_peer);
  // The address the open connection of `door` whose peer is `grpc_peer`
  // reached this server at (its own end: "10.0.0.11:7451", "[fd00::1]:7451";
  // an IPv4 peer of an IPv6 listener as IPv4), i.e. what the peer dialed;
  // "" when the guard is not installed, the peer is unknown or already
  // marked authenticated. Call before MarkAuthenticated.
  static std::string DialedAddressOf(Door door, absl::string_view grpc_peer);

  // What the exported accept4() does; public so tests can call it directly.
  static int Accept(int listener, sockaddr* addr, socklen_t* addr_len, int flags);
  // What the exported close() does.
  static int Close(int fd);
};

// Raises this process's soft RLIMIT_NOFILE to `wanted` (0: to the hard
// limit), never above the hard limit; returns the soft limit in force.
int RaiseOpenFileLimit(int wanted);

// The caps that leave `headroom` descriptors below `open_file_limit` for the
// store, logs and outgoing channels: max_connections = limit - headroom,
// where headroom = max(64, limit / 8), and max_connections_per_peer an
// eighth of that, so a few addresses cannot take every connection (an IPv6
// peer is its /64). `requested_total`
// and `requested_per_peer` (0: not set) lower them.
ConnectionGuardOptions ConnectionCapsFor(int open_file_limit, int requested_total, int requested_per_peer);

}  // namespace trainyard::server
