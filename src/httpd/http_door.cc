// The HTTP door (see http_server.h): one thread that accepts every
// connection and reads each without blocking until its request is whole,
// keeps the caps, the deadlines and the order in which connections make
// room, and hands whole requests to the workers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "httpd/connection.h"
#include "httpd/http_server.h"
#include "nlohmann/json.hpp"

namespace trainyard::httpd {
namespace {

using Phase = HttpConnection::Phase;

// The per-peer cap's key: an IPv4 address, or an IPv6 address's /64 (one
// host holds a whole /64); IPv4-mapped IPv6 addresses count as IPv4.
std::string PeerKey(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, text, sizeof(text));
    return text;
  }
  if (a.ss_family != AF_INET6) return "local";
  in6_addr addr = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&addr)) {
    inet_ntop(AF_INET, &addr.s6_addr[12], text, sizeof(text));
    return text;
  }
  std::memset(&addr.s6_addr[8], 0, 8);
  inet_ntop(AF_INET6, &addr, text, sizeof(text));
  return absl::StrCat(text, "/64");
}

const char* Reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    default: return "Service Unavailable";
  }
}

// A whole answer with a JSON error, for the door to send as it closes.
std::string ErrorAnswer(int status, const std::string& message) {
  nlohmann::json body = {{"error", {{"code", status}, {"message", message}}}};
  std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return absl::StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\nContent-Type: application/json\r\nContent-Length: ",
                      text.size(), "\r\nConnection: close\r\n", status == 503 ? "Retry-After: 1\r\n" : "", "\r\n", text);
}

// Sends `text` without waiting: a client that cannot take it at once loses it.
void SendNow(HttpConnection& c, const std::string& text) {
  if (c.ssl != nullptr) {
    int n = SSL_write(c.ssl, text.data(), static_cast<int>(text.size()));
    (void)n;  // as below: nothing to do about a client that does not read
    return;
  }
  ssize_t n = send(c.fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n;  // nothing to do about a client that cannot take it: it is closed either way
}

std::string Secs(absl::Duration d) { return absl::FormatDuration(d); }

}  // namespace

void HttpServer::DoorLoop() {
  std::vector<pollfd> fds;
  while (true) {
    TakeBack();
    absl::Time now = absl::Now();
    bool accepting = now >= door_->accept_paused_until;
    absl::Time next = accepting ? absl::InfiniteFuture() : door_->accept_paused_until;
    fds.clear();
    fds.push_back({wake_fd_[0], POLLIN, 0});
    fds.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
    for (const auto& [fd, c] : door_->held) {
      fds.push_back({fd, static_cast<short>(c->want_write ? POLLOUT : POLLIN), 0});
      next = std::min(next, c->deadline);
    }
    int64_t ms = next == absl::InfiniteFuture() ? -1 : std::clamp<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 0, 60000);
    int r = poll(fds.data(), fds.size(), static_cast<int>(ms));
    if (r < 0 && errno != EINTR) {
      Log(LogLevel::kError, "http", "poll: %s; the HTTP door closes", strerror(errno));
      break;
    }
    if (r > 0 && fds[0].revents) {
      char buf[256];
      while (read(wake_fd_[0], buf, sizeof(buf)) > 0) {
      }
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    for (size_t i = 2; r > 0 && i < fds.size(); ++i) {
      if (fds[i].revents) OnReady(fds[i].fd);
    }
    if (r > 0 && (fds[1].revents & POLLIN)) AcceptAll();
    Expire(absl::Now());
  }
  door_->held.clear();  // closes them; the counts end with the server
}

void HttpServer::AcceptAll() {
  // A bounded batch, so the connections already open are read in between.
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Admit(std::make_unique<HttpConnection>(fd, PeerKey(a)));
      continue;
    }
    // A connection that went away before it was taken, or a signal: go on.
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    // Out of descriptors or memory: wait a little for some to be freed
    // rather than spin, and say so now and then.
    absl::Time now = absl::Now();
    if (now - door_->last_warning > absl::Seconds(10)) {
      Log(LogLevel::kWarning, "http", "accept: %s; new connections wait", strerror(errno));
      door_->last_warning = now;
    }
    door_->accept_paused_until = now + absl::Milliseconds(50);
    return;
  }
}

void HttpServer::Admit(std::unique_ptr<HttpConnection> c) {
  auto peer = door_->per_peer.find(c->peer);
  bool peer_full = peer != door_->per_peer.end() && peer->second >= max_per_peer_;
  if (peer_full || (door_->open >= options_.max_connections && !Evict())) {
    Bump(peer_full ? &HttpConnectionStats::refused_peer_cap : &HttpConnectionStats::refused_total_cap);
    // Over TLS an answer would need a handshake: the client sees the close.
    if (tls_ == nullptr) {
      SendNow(*c, ErrorAnswer(503, peer_full ? "too many HTTP connections from your address; close some and try again"
                                             : "the server has too many HTTP connections open; try again"));
      shutdown(c->fd, SHUT_WR);
    }
    return;  // not counted: closed as it goes
  }
  ++door_->open;
  ++door_->per_peer[c->peer];
  {
    absl::MutexLock lock(&mu_);
    ++stats_.accepted;
    stats_.open = door_->open;
  }
  absl::Time now = absl::Now();
  c->since = now;
  c->last_active = now;
  c->deadline = now + options_.header_timeout;  // the handshake's time is the head's
  c->phase = Phase::kHead;
  if (tls_ != nullptr) {
    c->ssl = SSL_new(tls_);
    if (c->ssl == nullptr || SSL_set_fd(c->ssl, c->fd) != 1) return CloseConnection(std::move(c));
    SSL_set_accept_state(c->ssl);
    c->phase = Phase::kHandshake;
  }
  int fd = c->fd;
  door_->held[fd] = std::move(c);
}

bool HttpServer::Evict() {
  // First an idle anonymous connection (idle longest), then one still
  // sending its request (nobody knows yet whose; quiet longest), then an
  // idle trusted one. A trusted request whose body is coming stays.
  HttpConnection* victim = nullptr;
  int victim_rank = 3;
  auto age = [](const HttpConnection& c) { return c.phase == Phase::kIdle ? c.since : c.last_active; };
  for (const auto& [fd, c] : door_->held) {
    int rank = c->phase == Phase::kIdle ? (c->trusted ? 2 : 0) : (c->trusted ? 3 : 1);
    if (rank < victim_rank || (rank == victim_rank && rank < 3 && age(*c) < age(*victim))) {
      victim = c.get();
      victim_rank = rank;
    }
  }
  if (victim == nullptr) return false;
  Bump(victim_rank == 1 ? &HttpConnectionStats::evicted_unfinished : &HttpConnectionStats::evicted_idle);
  CloseConnection(TakeHeld(victim->fd));
  return true;
}

void HttpServer::OnReady(int fd) {
  auto it = door_->held.find(fd);
  if (it == door_->held.end()) return;
  HttpConnection& c = *it->second;
  if (c.phase == Phase::kHandshake) {
    c.last_active = absl::Now();
    int r = SSL_accept(c.ssl);
    int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c.ssl, r);
    c.want_write = err == SSL_ERROR_WANT_WRITE;
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;
    // A client that does not speak TLS (or trusts another CA) ends here.
    if (err != SSL_ERROR_NONE) return CloseConnection(TakeHeld(fd));
    c.phase = Phase::kHead;
  }
  size_t had = c.in.size();
  bool open = ReadInto(c);
  if (c.in.size() > had) c.last_active = absl::Now();
  if (c.phase == Phase::kIdle) {
    if (c.in.empty()) {
      if (!open) CloseConnection(TakeHeld(fd));
      return;
    }
    c.NextRequest(absl::Now(), options_.header_timeout);
  }
  Advance(fd);
  // A client that closed its side after a whole request is still answered.
  if (!open && door_->held.count(fd) != 0) CloseConnection(TakeHeld(fd));
}

bool HttpServer::ReadInto(HttpConnection& c) {
  // Beyond this the request is refused, whatever the rest would be.
  const size_t most = static_cast<size_t>(options_.max_header_bytes + 2 * options_.max_body_bytes + (64 << 10));
  char buf[16384];
  c.want_write = false;
  while (c.in.size() < most) {
    size_t want = std::min(sizeof(buf), most - c.in.size());
    if (c.ssl != nullptr) {
      int r = SSL_read(c.ssl, buf, static_cast<int>(want));
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        continue;
      }
      int err = SSL_get_error(c.ssl, r);
      c.want_write = err == SSL_ERROR_WANT_WRITE;
      return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
    }
    ssize_t r = recv(c.fd, buf, want, 0);
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
    } else if (r == 0) {
      return false;
    } else if (errno != EINTR) {
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }
  return true;
}

void HttpServer::Advance(int fd) {
  HttpConnection& c = *door_->held.at(fd);
  absl::Time now = absl::Now();
  if (c.phase == Phase::kHead) {
    size_t end = FindHeadEnd(c.in, c.head_scan);
    c.head_scan = c.in.size();
    if (end == absl::string_view::npos ? c.in.size() > static_cast<size_t>(options_.max_header_bytes)
                                       : end > static_cast<size_t>(options_.max_header_bytes)) {
      return AnswerAndClose(TakeHeld(fd), 431, "the request's header fields are above the most this server takes");
    }
    if (end == absl::string_view::npos) return;
    c.head = ParseHead(absl::string_view(c.in).substr(0, end));
    if (!c.head.error.empty()) return AnswerAndClose(TakeHeld(fd), 400, c.head.error);
    c.trusted = options_.trusted && !c.head.authorization.empty() && options_.trusted(c.head.authorization);
    c.head_end = NormalizeHead(&c.in, end, c.head);
    c.chunks = ChunkScan{.pos = c.head_end, .in_trailers = false};
    c.phase = Phase::kBody;
    c.since = now;
    c.deadline = now + options_.body_timeout;
  }
  const int64_t max_body = options_.max_body_bytes;
  bool whole;
  if (c.head.chunked) {
    size_t end = 0;
    ChunkResult r = ScanChunks(c.in, &c.chunks, &end);
    if (r == ChunkResult::kMalformed) return AnswerAndClose(TakeHeld(fd), 400, "the chunked request body is malformed");
    whole = r == ChunkResult::kDone;
    if (!whole && static_cast<int64_t>(c.in.size() - c.head_end) > 2 * max_body + (32 << 10)) {
      return AnswerAndClose(TakeHeld(fd), 413, "the request body is above the most this server takes");
    }
  } else {
    // Above the cap it goes at once: the library answers 413 for its route.
    int64_t length = c.head.has_length ? c.head.content_length : 0;
    whole = length > max_body || static_cast<int64_t>(c.in.size() - c.head_end) >= length;
  }
  if (whole) return Hand(fd);
  if (c.head.expects_continue && !c.continue_sent) {
    SendNow(c, "HTTP/1.1 100 Continue\r\n\r\n");
    c.continue_sent = true;
  }
}

void HttpServer::Hand(int fd) {
  std::unique_ptr<HttpConnection> c = TakeHeld(fd);
  c->phase = Phase::kBusy;
  c->deadline = absl::InfiniteFuture();
  // The request line is "METHOD TARGET VERSION": a proxied target queues
  // apart, whoever sent it.
  if (!options_.proxied_prefix.empty()) {
    size_t sp = c->in.find(' ');
    c->proxied = sp != std::string::npos && sp < c->head_end &&
                 absl::string_view(c->in).substr(sp + 1, options_.proxied_prefix.size()) == options_.proxied_prefix;
  }
  {
    absl::MutexLock lock(&mu_);
    if (c->proxied) {
      if (static_cast<int>(ready_proxied_.size()) < most_proxied_) {
        ready_proxied_.push_back(std::move(c));
        cv_.Signal();
        return;
      }
      ++stats_.refused_proxied;
    } else if (c->trusted) {
      ++stats_.trusted_requests;
      ready_trusted_.push_back(std::move(c));
      cv_.Signal();
      return;
    } else if (static_cast<int>(ready_anonymous_.size()) + anonymous_serving_ < most_anonymous_) {
      ready_anonymous_.push_back(std::move(c));
      cv_.Signal();
      return;
    } else {
      ++stats_.refused_anonymous;
    }
  }
  const char* why = c->proxied ? "the server has as many requests waiting for services as it takes; try again"
                               : "the server is busy with requests without a token; try again, or send your token";
  AnswerAndClose(std::move(c), 503, why);
}

void HttpServer::TakeBack() {
  std::vector<std::pair<std::unique_ptr<HttpConnection>, bool>> back;
  {
    absl::MutexLock lock(&mu_);
    back.swap(returned_);
  }
  absl::Time now = absl::Now();
  for (auto& [c, keep] : back) {
    if (!keep) {
      CloseConnection(std::move(c));
      continue;
    }
    int fd = c->fd;
    bool more = !c->in.empty();  // the next request has begun (pipelined)
    if (more) {
      c->NextRequest(now, options_.header_timeout);
      c->last_active = now;
    } else {
      c->phase = Phase::kIdle;
      c->since = now;
      c->deadline = now + options_.keep_alive;
    }
    door_->held[fd] = std::move(c);
    if (more) Advance(fd);
  }
}

void HttpServer::Expire(absl::Time now) {
  std::vector<int> due;
  for (const auto& [fd, c] : door_->held) {
    if (c->deadline <= now) due.push_back(fd);
  }
  for (int fd : due) {
    std::unique_ptr<HttpConnection> c = TakeHeld(fd);
    switch (c->phase) {
      case Phase::kIdle:
        Bump(&HttpConnectionStats::idle_timeouts);
        CloseConnection(std::move(c));
        break;
      case Phase::kBody:
        Bump(&HttpConnectionStats::body_timeouts);
        AnswerAndClose(std::move(c), 408,
                       absl::StrCat("the request's body did not come whole within ", Secs(options_.body_timeout)));
        break;
      case Phase::kHandshake:
        Bump(&HttpConnectionStats::header_timeouts);
        CloseConnection(std::move(c));
        break;
      default:
        Bump(&HttpConnectionStats::header_timeouts);
        AnswerAndClose(std::move(c), 408,
                       absl::StrCat("the request's head did not come whole within ", Secs(options_.header_timeout)));
    }
  }
}

std::unique_ptr<HttpConnection> HttpServer::TakeHeld(int fd) {
  auto it = door_->held.find(fd);
  std::unique_ptr<HttpConnection> c = std::move(it->second);
  door_->held.erase(it);
  return c;
}

void HttpServer::AnswerAndClose(std::unique_ptr<HttpConnection> c, int status, const std::string& message) {
  SendNow(*c, ErrorAnswer(status, message));
  if (c->ssl == nullptr) shutdown(c->fd, SHUT_WR);
  CloseConnection(std::move(c));
}

void HttpServer::CloseConnection(std::unique_ptr<HttpConnection> c) {
  auto it = door_->per_peer.find(c->peer);
  if (it != door_->per_peer.end() && --it->second <= 0) door_->per_peer.erase(it);
  --door_->open;
  c.reset();  // closes it
  absl::MutexLock lock(&mu_);
  stats_.open = door_->open;
}

void HttpServer::Bump(int64_t HttpConnectionStats::*counter) {
  absl::MutexLock lock(&mu_);
  ++(stats_.*counter);
}

}  // namespace trainyard::httpd
