// The connection guard (see connection_guard.h): the accept4()/close() this
// process exports, and the counts behind them.
//
// The close() path runs on every descriptor any library closes, possibly in
// a child between fork and exec, so it takes no lock and allocates nothing:
// a per-descriptor slot says whether the descriptor is a counted connection
// and which peer bucket it counts against, and the counts are atomics.
// Descriptors closed some other way (dup2 over them, close_range) would stay
// counted; when a cap is reached the guard re-checks its slots against the
// descriptors' inodes, at most once a second, and forgets those that changed.
#include "server/connection_guard.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"

namespace trainyard::server {
namespace {

constexpr uint32_t kPeerBuckets = 1 << 16;
constexpr int kMaxSlots = 1 << 20;  // descriptors above this are not counted

int RawAccept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return static_cast<int>(syscall(SYS_accept4, fd, addr, len, flags));
}
int RawClose(int fd) { return static_cast<int>(syscall(SYS_close, fd)); }

struct Slot {
  std::atomic<uint32_t> bucket{0};  // 0: not a counted connection; else peer bucket + 1
  std::atomic<uint64_t> inode{0};
};

struct GuardState {
  explicit GuardState(int n) : slot_count(n), slots(new Slot[n]), per_bucket(new std::atomic<int32_t>[kPeerBuckets]) {
    for (uint32_t i = 0; i < kPeerBuckets; ++i) per_bucket[i].store(0, std::memory_order_relaxed);
  }
  std::atomic<bool> enabled{false};
  std::atomic<int> port{0};
  std::atomic<int> max_total{0};
  std::atomic<int> max_per_peer{0};
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused_total{0};
  std::atomic<int64_t> refused_peer{0};
  std::atomic<int64_t> refused_fd{0};
  const int slot_count;  // descriptors at or above it are refused (the open-file limit at Install)
  std::unique_ptr<Slot[]> slots;
  std::unique_ptr<std::atomic<int32_t>[]> per_bucket;
  std::mutex accept_mu;       // one accept decision at a time (the slots are free-threaded)
  int reserve_fd = -1;        // guarded by accept_mu
  int64_t last_sweep_ns = 0;  // guarded by accept_mu
  int64_t last_log_ns = 0;    // guarded by accept_mu
};

// Null until Install(), so a process that never installs the guard (the CLI,
// the agent) pays one load per close(). Never freed: close() may run during
// exit, after static destructors.
std::atomic<GuardState*> g_state{nullptr};

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// 0 for a peer without a per-peer cap (Unix sockets), else bucket + 1.
uint32_t PeerBucket(const sockaddr_storage& peer) {
  absl::string_view bytes;
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    bytes = absl::string_view(reinterpret_cast<const char*>(&in->sin_addr), sizeof(in->sin_addr));
  } else if (peer.ss_family == AF_INET6) {
    // One IPv6 peer is its /64: a host is given a whole /64 to pick from.
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    bool v4_mapped = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
    const char* a = reinterpret_cast<const char*>(&in6->sin6_addr);
    bytes = v4_mapped ? absl::string_view(a + 12, 4) : absl::string_view(a, 8);
  } else {
    return 0;
  }
  return static_cast<uint32_t>(absl::HashOf(bytes) % kPeerBuckets) + 1;
}

int LocalPort(int listener) {
  sockaddr_storage local;
  socklen_t len = sizeof(local);
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&local), &len) != 0) return -1;
  if (local.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  if (local.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
  return -1;
}

uint64_t InodeOf(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

void Forget(GuardState& g, int fd) {
  uint32_t bucket = g.slots[fd].bucket.exchange(0, std::memory_order_acq_rel);
  if (bucket == 0) return;
  g.open.fetch_sub(1, std::memory_order_relaxed);
  if (bucket != kPeerBuckets + 1) g.per_bucket[bucket - 1].fetch_sub(1, std::memory_order_relaxed);
}

// Forgets counted descriptors that are no longer the socket that was
// accepted (closed without close(), or reused). At most once a second.
void SweepIfDue(GuardState& g) {
  int64_t now = MonotonicNs();
  if (now - g.last_sweep_ns < 1000000000) return;
  g.last_sweep_ns = now;
  for (int fd = 0; fd < g.slot_count; ++fd) {
    if (g.slots[fd].bucket.load(std::memory_order_relaxed) == 0) continue;
    if (InodeOf(fd) != g.slots[fd].inode.load(std::memory_order_relaxed)) Forget(g, fd);
  }
}

void LogRefusal(GuardState& g, const char* why) {
  int64_t now = MonotonicNs();
  if (now - g.last_log_ns < 10 * int64_t{1000000000}) return;
  g.last_log_ns = now;
  Log(LogLevel::kWarning, "server", "refusing connections: %s (open %d, refused so far: %d at the total cap, %d at a peer's cap, %d for want of descriptors)",
      why, g.open.load(), g.refused_total.load(), g.refused_peer.load(), g.refused_fd.load());
}

// The process is out of descriptors: frees the reserved one to take the
// waiting connection off the queue and drop it. false when there is none.
bool ShedOneWithReserve(GuardState& g, int listener) {
  if (g.reserve_fd < 0) return false;
  RawClose(g.reserve_fd);
  g.reserve_fd = -1;
  int c = RawAccept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c >= 0) RawClose(c);
  g.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (c < 0) return false;
  g.refused_fd.fetch_add(1, std::memory_order_relaxed);
  LogRefusal(g, "the process has no file descriptor left");
  return true;
}

enum class Verdict { kAdmit, kTotalCap, kPeerCap };

Verdict Judge(GuardState& g, uint32_t bucket) {
  auto over = [&] {
    if (g.open.load(std::memory_order_relaxed) >= g.max_total.load(std::memory_order_relaxed)) {
      return Verdict::kTotalCap;
    }
    if (bucket != 0 && g.per_bucket[bucket - 1].load(std::memory_order_relaxed) >=
                           g.max_per_peer.load(std::memory_order_relaxed)) {
      return Verdict::kPeerCap;
    }
    return Verdict::kAdmit;
  };
  Verdict v = over();
  if (v == Verdict::kAdmit) return v;
  SweepIfDue(g);
  return over();
}

}  // namespace

void ConnectionGuard::Install(const ConnectionGuardOptions& options) {
  static std::mutex install_mu;
  std::lock_guard<std::mutex> install_lock(install_mu);
  if (g_state.load() == nullptr) {
    rlimit lim;
    int n = getrlimit(RLIMIT_NOFILE, &lim) == 0 ? static_cast<int>(std::min<rlim_t>(lim.rlim_cur, kMaxSlots)) : 1024;
    g_state.store(new GuardState(n));
  }
  GuardState& g = *g_state.load();
  std::lock_guard<std::mutex> lock(g.accept_mu);
  g.port.store(options.port);
  g.max_total.store(options.max_connections);
  g.max_per_peer.store(options.max_connections_per_peer);
  if (g.reserve_fd < 0) g.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  g.enabled.store(true, std::memory_order_release);
}

void ConnectionGuard::UninstallForTest() {
  if (GuardState* g = g_state.load()) g->enabled.store(false, std::memory_order_release);
}

ConnectionGuardStats ConnectionGuard::Stats() {
  ConnectionGuardStats s;
  GuardState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return s;
  GuardState& g = *state;
  s.open = g.open.load();
  s.accepted = g.accepted.load();
  s.refused_total_cap = g.refused_total.load();
  s.refused_peer_cap = g.refused_peer.load();
  s.refused_no_fd = g.refused_fd.load();
  return s;
}

int ConnectionGuard::Accept(int listener, sockaddr* addr, socklen_t* addr_len, int flags) {
  GuardState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr || !state->enabled.load(std::memory_order_acquire)) {
    return RawAccept4(listener, addr, addr_len, flags);
  }
  GuardState& g = *state;
  if (LocalPort(listener) != g.port.load(std::memory_order_relaxed)) return RawAccept4(listener, addr, addr_len, flags);
  std::lock_guard<std::mutex> lock(g.accept_mu);
  // Loops until a connection is admitted or the queue is empty (EAGAIN on
  // a non-blocking listener), so an edge-triggered caller misses nothing.
  for (;;) {
    sockaddr_storage peer;
    socklen_t peer_len = sizeof(peer);
    int c = RawAccept4(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len, flags);
    if (c < 0) {
      if ((errno == EMFILE || errno == ENFILE) && ShedOneWithReserve(g, listener)) continue;
      return -1;
    }
    uint32_t bucket = PeerBucket(peer);
    Verdict v = Judge(g, bucket);
    if (v != Verdict::kAdmit || c >= g.slot_count) {
      RawClose(c);
      if (v == Verdict::kPeerCap) {
        g.refused_peer.fetch_add(1, std::memory_order_relaxed);
        LogRefusal(g, "a peer reached maxConnectionsPerPeer");
      } else {
        g.refused_total.fetch_add(1, std::memory_order_relaxed);
        LogRefusal(g, "maxConnections reached");
      }
      continue;
    }
    Forget(g, c);  // a slot left counted by a close that bypassed close() (dup2 over it)
    g.slots[c].inode.store(InodeOf(c), std::memory_order_relaxed);
    g.slots[c].bucket.store(bucket == 0 ? kPeerBuckets + 1 : bucket, std::memory_order_release);
    g.open.fetch_add(1, std::memory_order_relaxed);
    if (bucket != 0) g.per_bucket[bucket - 1].fetch_add(1, std::memory_order_relaxed);
    g.accepted.fetch_add(1, std::memory_order_relaxed);
    if (addr != nullptr && addr_len != nullptr) {
      std::memcpy(addr, &peer, std::min<socklen_t>(*addr_len, peer_len));
      *addr_len = peer_len;
    }
    return c;
  }
}

int ConnectionGuard::Close(int fd) {
  GuardState* g = g_state.load(std::memory_order_acquire);
  if (g != nullptr && fd >= 0 && fd < g->slot_count && g->slots[fd].bucket.load(std::memory_order_relaxed) != 0) {
    Forget(*g, fd);
  }
  return RawClose(fd);
}

int RaiseOpenFileLimit(int wanted) {
  rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  rlim_t target = wanted > 0 ? static_cast<rlim_t>(wanted) : lim.rlim_max;
  if (lim.rlim_max != RLIM_INFINITY) target = std::min(target, lim.rlim_max);
  lim.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) getrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 30));
}

ConnectionGuardOptions ConnectionCapsFor(int open_file_limit, int requested_total, int requested_per_peer) {
  int headroom = std::max(64, open_file_limit / 8);
  ConnectionGuardOptions o;
  o.max_connections = std::max(1, open_file_limit - headroom);
  if (requested_total > 0) o.max_connections = std::min(o.max_connections, requested_total);
  o.max_connections_per_peer = std::max(1, o.max_connections / 8);
  if (requested_per_peer > 0) o.max_connections_per_peer = std::min(o.max_connections, requested_per_peer);
  return o;
}

}  // namespace trainyard::server

// The symbols the shared libraries (gRPC) call. Exported from the
// executable, they come before libc's in the dynamic linker's search.
extern "C" int accept4(int fd, sockaddr* addr, socklen_t* addr_len, int flags) {
  return trainyard::server::ConnectionGuard::Accept(fd, addr, addr_len, flags);
}

extern "C" int close(int fd) { return trainyard::server::ConnectionGuard::Close(fd); }
