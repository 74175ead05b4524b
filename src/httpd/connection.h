// HttpConnection: one client connection of an HttpServer, as the door
// (http_door.cc) reads it and a worker (http_server.cc) serves it. Only one
// thread holds it at a time: the door while it is read or idle, a worker
// while its request is served; the hand-over goes through the server's
// mutex. Private to httpd/.
#pragma once

#include <openssl/ssl.h>
#include <unistd.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "httpd/http_server.h"
#include "httpd/request_frame.h"

namespace trainyard::httpd {

struct HttpConnection {
  enum class Phase {
    kHandshake,  // TLS handshake not done
    kHead,       // the request's head is coming
    kBody,       // the head is whole, the body is coming
    kIdle,       // between requests (kept alive)
    kBusy,       // whole: waiting for a worker or served by one
  };

  HttpConnection(int fd_in, std::string peer_in) : fd(fd_in), peer(std::move(peer_in)) {}
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  ~HttpConnection() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }

  // Back to kHead for the next request, whose first bytes (if any) are in `in`.
  void NextRequest(absl::Time now, absl::Duration header_timeout) {
    phase = Phase::kHead;
    since = now;
    deadline = now + header_timeout;
    head_scan = 0;
    head_end = 0;
    head = RequestHead{};
    trusted = false;
    proxied = false;
    continue_sent = false;
  }

  const int fd;
  const std::string peer;  // the peer's address as the per-peer cap counts it
  SSL* ssl = nullptr;      // the TLS session (HTTPS), owned
  bool want_write = false;  // TLS waits to write (a handshake's answer)

  Phase phase = Phase::kHead;
  absl::Time since;     // when it entered its phase (kIdle: the oldest is evicted first)
  // When its client last sent bytes (or connected): of the connections
  // still sending a request, the one quiet longest is evicted first, so a
  // client that sends its request at once outlives a flood that drips.
  absl::Time last_active;
  absl::Time deadline;  // of its phase (kBusy: none)

  std::string in;          // bytes received and not yet served
  size_t head_scan = 0;    // FindHeadEnd goes on from here
  size_t head_end = 0;     // past the head (kBody, kBusy)
  RequestHead head;        // kBody, kBusy
  ChunkScan chunks;        // kBody of a chunked request
  bool trusted = false;    // this request came with a token `trusted` accepts
  bool proxied = false;    // its target is under HttpOptions::proxied_prefix
  bool continue_sent = false;
  int served = 0;          // requests answered on this connection
};

// What only the door's thread touches.
struct HttpServer::Door {
  // Connections being read or idle (the door's); the others are the workers'.
  std::map<int, std::unique_ptr<HttpConnection>> held;
  std::map<std::string, int> per_peer;  // open connections (wherever they are), by peer
  int open = 0;
  absl::Time accept_paused_until = absl::InfinitePast();  // out of descriptors: accept later
  absl::Time last_warning = absl::InfinitePast();
};

}  // namespace trainyard::httpd
