// The server's guard on incoming connections: a cap on open connections in
// all and per peer address, kept below the file-descriptor limit, and a
// listener that keeps accepting after the process ran out of descriptors.
//
// Why it sits under gRPC rather than in it: the gRPC of Debian 12 (1.51) has
// no connection cap, and its listener stops for good after one accept that
// fails with EMFILE ("accept4: Too many open files"), so a connection flood
// locked out every client and reconnecting agent until a restart. The
// server's process defines `accept4` and `close` itself (exported to the
// shared libraries, see src/server/CMakeLists.txt); while the guard is
// installed they count connections by peer, close at once what is over a
// cap, and on EMFILE free a reserved descriptor to accept and drop the
// waiting connection, so the listener never sees the error. Without
// Install() both are plain system calls.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace trainyard::server {

struct ConnectionGuardOptions {
  int port = 0;  // the guarded listener's local port (-1: Unix sockets); others' accepts pass through
  int max_connections = 0;           // open connections accepted, all peers together
  int max_connections_per_peer = 0;  // from one IP address (Unix-socket peers: no per-peer cap)
};

// What the guard has done since Install(), for /metrics and the logs.
struct ConnectionGuardStats {
  int64_t open = 0;                 // accepted connections still open
  int64_t accepted = 0;             // admitted, in all
  int64_t refused_total_cap = 0;    // closed at once: max_connections reached
  int64_t refused_peer_cap = 0;     // closed at once: the peer's cap reached
  int64_t refused_no_fd = 0;        // closed at once: the process had no descriptor left
};

class ConnectionGuard {
 public:
  // Turns the guard on for the listeners of this process bound to
  // `options.port` (the gRPC port; the HTTP listener has caps of its own).
  // Opens the reserved descriptor. May be called again to change the caps.
  // REQUIRES: the port and both caps positive.
  static void Install(const ConnectionGuardOptions& options);
  // Back to plain system calls (tests). Connections stay counted until closed.
  static void UninstallForTest();
  static ConnectionGuardStats Stats();

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
