// The connection guard (see connection_guard.h): the accept4()/close() this
// process exports, and the counts behind them.
//
// The close() path runs on every descriptor any library closes, possibly in
// a child between fork and exec, so it takes no lock and allocates nothing:
// a per-descriptor slot says whether the descriptor is a counted connection,
// of which door, which peer's counter it counts against and whether it has
// authenticated, and the counts are atomics. Each peer address has a counter
// of its own (no two peers share one, so a peer never reaches its cap on
// another's connections): the accept path, under its lock, gives a peer a
// free counter and takes back those that count nothing. A connection shut down for a
// newcomer (not authenticated within its grace) is marked "evicting" while
// the guard shuts it down; a close() of it waits for that mark to clear, so
// the shutdown never reaches a descriptor number reused meanwhile.
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

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"

namespace trainyard::server {
namespace {

// Peers with a connection open at one door at the same time, at most; a
// newcomer from yet another peer makes room as at the total cap, or is
// refused.
constexpr uint32_t kPeerBuckets = 1 << 16;
// PeerBucket's answer when every counter counts a peer with connections.
constexpr uint32_t kNoPeerCounter = ~uint32_t{0};
constexpr int kMaxSlots = 1 << 20;  // descriptors above this are not counted

int RawAccept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return static_cast<int>(syscall(SYS_accept4, fd, addr, len, flags));
}
int RawClose(int fd) { return static_cast<int>(syscall(SYS_close, fd)); }

// Slot::flags: the door (bit 0), authenticated, evicting.
constexpr uint32_t kDoorBit = 1;
constexpr uint32_t kAuthenticated = 2;
constexpr uint32_t kEvicting = 4;

struct Slot {
  std::atomic<uint32_t> bucket{0};  // 0: not a counted connection; else peer bucket + 1
  std::atomic<uint32_t> flags{0};
  std::atomic<uint32_t> generation{0};  // raised on each admission into this slot
  std::atomic<uint64_t> inode{0};
};

// A connection admitted, in accept order: who may be shut down for a
// newcomer is looked for from the oldest.
struct Admitted {
  int fd;
  uint32_t generation;
  int64_t accepted_ns;
};

// A peer as its per-peer cap sees it: an IPv4 address, or an IPv6 /64.
struct PeerAddress {
  bool v4 = false;
  uint64_t bits = 0;
  bool operator==(const PeerAddress& o) const { return v4 == o.v4 && bits == o.bits; }
  template <typename H>
  friend H AbslHashValue(H h, const PeerAddress& a) {
    return H::combine(std::move(h), a.v4, a.bits);
  }
};

struct DoorState {
  DoorState() : per_bucket(new std::atomic<int32_t>[kPeerBuckets]) {
    for (uint32_t i = 0; i < kPeerBuckets; ++i) per_bucket[i].store(0, std::memory_order_relaxed);
    free_buckets.reserve(kPeerBuckets);
    for (uint32_t i = kPeerBuckets; i > 0; --i) free_buckets.push_back(i - 1);
  }
  std::atomic<bool> enabled{false};
  std::atomic<int> port{0};
  std::atomic<int> max_total{0};
  std::atomic<int> max_per_peer{0};
  std::atomic<int> grace_ms{0};
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused_total{0};
  std::atomic<int64_t> refused_peer{0};
  std::atomic<int64_t> refused_fd{0};
  std::atomic<int64_t> evicted{0};
  std::unique_ptr<std::atomic<int32_t>[]> per_bucket;  // connections open, by peer counter
  // Which counter each peer has (guarded by GuardState::accept_mu, as is
  // the free list). A counter that counts nothing goes back to the free
  // list when the map has grown or no counter is free; close() only ever
  // lowers a count, so one that reads 0 under the lock stays 0 until the
  // accept path raises it.
  absl::flat_hash_map<PeerAddress, uint32_t> bucket_of;
  std::vector<uint32_t> free_buckets;
  std::deque<Admitted> admitted;  // guarded by GuardState::accept_mu; unauthenticated TCP ones only
};

struct GuardState {
  explicit GuardState(int n) : slot_count(n), slots(new Slot[n]) {}
  DoorState doors[kDoors];
  const int slot_count;  // descriptors at or above it are refused (the open-file limit at Install)
  std::unique_ptr<Slot[]> slots;
  std::mutex accept_mu;       // one accept decision at a time (the slots are free-threaded)
  int reserve_fd = -1;        // guarded by accept_mu
  int64_t last_sweep_ns = 0;  // guarded by accept_mu
  int64_t last_log_ns = 0;    // guarded by accept_mu
  // (door, peer address, peer port) -> the slot of an unauthenticated
  // connection, for MarkAuthenticated and DialedAddressOf. Stale entries (closed, reused) are
  // told by the generation and pruned as the map grows.
  std::mutex peers_mu;  // taken after accept_mu where both are held
  absl::flat_hash_map<uint64_t, std::pair<int, uint32_t>> peers;  // guarded by peers_mu
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

// Gives the counters of peers that have no connection open back to the free
// list. Under accept_mu.
void FreeIdleBuckets(DoorState& d) {
  for (auto it = d.bucket_of.begin(); it != d.bucket_of.end();) {
    if (d.per_bucket[it->second].load(std::memory_order_relaxed) == 0) {
      d.free_buckets.push_back(it->second);
      d.bucket_of.erase(it++);
    } else {
      ++it;
    }
  }
}

// 0 for a peer without a per-peer cap (Unix sockets), else its counter + 1;
// kNoPeerCounter when kPeerBuckets other peers hold connections. Under
// accept_mu.
uint32_t PeerBucket(DoorState& d, const sockaddr_storage& peer) {
  PeerAddress a;
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    a.v4 = true;
    a.bits = ntohl(in->sin_addr.s_addr);
  } else if (peer.ss_family == AF_INET6) {
    // One IPv6 peer is its /64: a host is given a whole /64 to pick from.
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    const unsigned char* b = in6->sin6_addr.s6_addr;
    a.v4 = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
    for (int i = a.v4 ? 12 : 0; i < (a.v4 ? 16 : 8); ++i) a.bits = (a.bits << 8) | b[i];
  } else {
    return 0;
  }
  if (auto it = d.bucket_of.find(a); it != d.bucket_of.end()) return it->second + 1;
  size_t open = static_cast<size_t>(std::max<int64_t>(0, d.open.load(std::memory_order_relaxed)));
  if (d.free_buckets.empty() || d.bucket_of.size() > 2 * open + 1024) FreeIdleBuckets(d);
  if (d.free_buckets.empty()) return kNoPeerCounter;
  uint32_t bucket = d.free_buckets.back();
  d.free_buckets.pop_back();
  d.bucket_of.emplace(a, bucket);
  return bucket + 1;
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

DoorState& DoorOf(GuardState& g, const Slot& slot) {
  return g.doors[slot.flags.load(std::memory_order_relaxed) & kDoorBit];
}

// Uncounts the connection in slot `fd`; false when it was not counted (a
// racing close() or eviction did it).
bool Forget(GuardState& g, int fd) {
  Slot& slot = g.slots[fd];
  DoorState& d = DoorOf(g, slot);
  uint32_t bucket = slot.bucket.exchange(0, std::memory_order_seq_cst);
  if (bucket == 0) return false;
  d.open.fetch_sub(1, std::memory_order_relaxed);
  if (bucket != kPeerBuckets + 1) d.per_bucket[bucket - 1].fetch_sub(1, std::memory_order_relaxed);
  return true;
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

void LogRefusal(GuardState& g, const DoorState& d, const char* why) {
  int64_t now = MonotonicNs();
  if (now - g.last_log_ns < 10 * int64_t{1000000000}) return;
  g.last_log_ns = now;
  Log(LogLevel::kWarning, "server",
      "refusing connections at the %s port: %s (open %d, refused so far: %d at the total cap, %d at a peer's cap, "
      "%d for want of descriptors; %d unauthenticated ones shut down for newcomers)",
      &d == &g.doors[1] ? "agent" : "client", why, d.open.load(), d.refused_total.load(), d.refused_peer.load(),
      d.refused_fd.load(), d.evicted.load());
}

// The process is out of descriptors: frees the reserved one to take the
// waiting connection off the queue and drop it. false when there is none.
bool ShedOneWithReserve(GuardState& g, DoorState& d, int listener) {
  if (g.reserve_fd < 0) return false;
  RawClose(g.reserve_fd);
  g.reserve_fd = -1;
  int c = RawAccept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c >= 0) RawClose(c);
  g.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (c < 0) return false;
  d.refused_fd.fetch_add(1, std::memory_order_relaxed);
  LogRefusal(g, d, "the process has no file descriptor left");
  return true;
}

enum class Verdict { kAdmit, kTotalCap, kPeerCap };

Verdict Over(const DoorState& d, uint32_t bucket) {
  if (d.open.load(std::memory_order_relaxed) >= d.max_total.load(std::memory_order_relaxed)) {
    return Verdict::kTotalCap;
  }
  if (bucket != 0 &&
      d.per_bucket[bucket - 1].load(std::memory_order_relaxed) >= d.max_per_peer.load(std::memory_order_relaxed)) {
    return Verdict::kPeerCap;
  }
  return Verdict::kAdmit;
}

bool Unauthenticated(const Slot& slot, const Admitted& a) {
  return slot.generation.load(std::memory_order_relaxed) == a.generation &&
         slot.bucket.load(std::memory_order_relaxed) != 0 &&
         (slot.flags.load(std::memory_order_relaxed) & (kAuthenticated | kEvicting)) == 0;
}

// Shuts down the connection of `a` and uncounts it (gRPC then closes it).
// The evicting mark keeps a racing close() from freeing the number first.
bool Evict(GuardState& g, DoorState& d, const Admitted& a) {
  Slot& slot = g.slots[a.fd];
  slot.flags.fetch_or(kEvicting, std::memory_order_seq_cst);
  bool ours = slot.generation.load(std::memory_order_seq_cst) == a.generation && Forget(g, a.fd);
  if (ours) shutdown(a.fd, SHUT_RDWR);
  slot.flags.fetch_and(~kEvicting, std::memory_order_seq_cst);
  if (ours) d.evicted.fetch_add(1, std::memory_order_relaxed);
  return ours;
}

// Makes room for a newcomer: shuts down the oldest connection of door `d`
// (of peer `bucket` unless 0) that has not authenticated within the grace.
// false when none has.
bool EvictUnauthenticated(GuardState& g, DoorState& d, uint32_t bucket) {
  int grace_ms = d.grace_ms.load(std::memory_order_relaxed);
  if (grace_ms <= 0) return false;
  int64_t young = MonotonicNs() - int64_t{grace_ms} * 1000000;
  std::deque<Admitted>& q = d.admitted;
  for (size_t i = 0; i < q.size();) {
    const Admitted& a = q[i];
    const Slot& slot = g.slots[a.fd];
    if (!Unauthenticated(slot, a)) {
      if (i == 0) {
        q.pop_front();
      } else {
        ++i;
      }
      continue;
    }
    if (a.accepted_ns > young) return false;  // the rest are younger still
    if (bucket != 0 && slot.bucket.load(std::memory_order_relaxed) != bucket) {
      ++i;
      continue;
    }
    Admitted victim = a;
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
    if (Evict(g, d, victim)) return true;
  }
  return false;
}

// The verdict on a newcomer of peer `bucket`, after making room by shutting
// down unauthenticated connections past their grace where that helps.
Verdict Judge(GuardState& g, DoorState& d, uint32_t bucket) {
  Verdict v = Over(d, bucket);
  if (v == Verdict::kAdmit) return v;
  SweepIfDue(g);
  for (int tries = 0; tries < 2 && (v = Over(d, bucket)) != Verdict::kAdmit; ++tries) {
    if (!EvictUnauthenticated(g, d, v == Verdict::kPeerCap ? bucket : 0)) break;
  }
  return Over(d, bucket);
}

// A key for (door, peer address, peer port); 0 for none (Unix sockets).
uint64_t PeerKey(int door, const sockaddr_storage& peer) {
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    return absl::HashOf(door, in->sin_addr.s_addr, in->sin_port) | 1;
  }
  if (peer.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      uint32_t v4;
      std::memcpy(&v4, reinterpret_cast<const char*>(&in6->sin6_addr) + 12, 4);
      return absl::HashOf(door, v4, in6->sin6_port) | 1;
    }
    absl::string_view a(reinterpret_cast<const char*>(&in6->sin6_addr), 16);
    return absl::HashOf(door, a, in6->sin6_port) | 1;
  }
  return 0;
}

// gRPC's peer text ("ipv4:1.2.3.4:5", "ipv6:[::1]:5", "ipv6:%5B::1%5D:5")
// as an address; false for anything else.
bool ParseGrpcPeer(absl::string_view peer, sockaddr_storage* out) {
  bool v4 = absl::ConsumePrefix(&peer, "ipv4:");
  if (!v4 && !absl::ConsumePrefix(&peer, "ipv6:")) return false;
  size_t colon = peer.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(peer.substr(colon + 1), &port)) return false;
  absl::string_view host = peer.substr(0, colon);
  if (!v4) {
    if (!absl::ConsumePrefix(&host, "[")) absl::ConsumePrefix(&host, "%5B");
    if (!absl::ConsumeSuffix(&host, "]")) absl::ConsumeSuffix(&host, "%5D");
  }
  std::string text(host);
  std::memset(out, 0, sizeof(*out));
  if (v4) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    return inet_pton(AF_INET, text.c_str(), &in->sin_addr) == 1;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET6, text.c_str(), &in6->sin6_addr) == 1;
}

// Drops what no longer names an unauthenticated connection, once the
// records have grown to twice what is open (amortized O(1) per accept).
void PruneIfGrown(GuardState& g, DoorState& d) {
  size_t open = static_cast<size_t>(std::max<int64_t>(0, d.open.load(std::memory_order_relaxed)));
  if (d.admitted.size() > 2 * open + 1024) {
    std::deque<Admitted> kept;
    for (const Admitted& a : d.admitted) {
      if (Unauthenticated(g.slots[a.fd], a)) kept.push_back(a);
    }
    d.admitted.swap(kept);
  }
  std::lock_guard<std::mutex> lock(g.peers_mu);
  if (g.peers.size() <= 2 * open + 1024) return;
  for (auto it = g.peers.begin(); it != g.peers.end();) {
    const Slot& slot = g.slots[it->second.first];
    bool live = slot.generation.load(std::memory_order_relaxed) == it->second.second &&
                slot.bucket.load(std::memory_order_relaxed) != 0 &&
                (slot.flags.load(std::memory_order_relaxed) & kAuthenticated) == 0;
    if (live) {
      ++it;
    } else {
      g.peers.erase(it++);
    }
  }
}

// Counts connection `c` of peer `peer` (bucket `bucket`) at door `door`.
void Admit(GuardState& g, int door, int c, const sockaddr_storage& peer, uint32_t bucket) {
  DoorState& d = g.doors[door];
  Forget(g, c);  // a slot left counted by a close that bypassed close() (dup2 over it)
  Slot& slot = g.slots[c];
  uint32_t generation = slot.generation.fetch_add(1, std::memory_order_relaxed) + 1;
  slot.inode.store(InodeOf(c), std::memory_order_relaxed);
  uint64_t key = PeerKey(door, peer);
  // A Unix-socket peer got past the kernel's file permissions: authenticated.
  slot.flags.store(static_cast<uint32_t>(door) | (key == 0 ? kAuthenticated : 0), std::memory_order_relaxed);
  slot.bucket.store(bucket == 0 ? kPeerBuckets + 1 : bucket, std::memory_order_release);
  d.open.fetch_add(1, std::memory_order_relaxed);
  if (bucket != 0) d.per_bucket[bucket - 1].fetch_add(1, std::memory_order_relaxed);
  d.accepted.fetch_add(1, std::memory_order_relaxed);
  if (key == 0) return;
  {
    // Kept whatever the grace: DialedAddressOf finds the connection here too.
    std::lock_guard<std::mutex> lock(g.peers_mu);
    g.peers[key] = {c, generation};
  }
  if (d.grace_ms.load(std::memory_order_relaxed) > 0) d.admitted.push_back({c, generation, MonotonicNs()});
  PruneIfGrown(g, d);
}

int DoorOfPort(GuardState& g, int port) {
  for (int i = 0; i < kDoors; ++i) {
    if (g.doors[i].enabled.load(std::memory_order_acquire) && g.doors[i].port.load(std::memory_order_relaxed) == port) {
      return i;
    }
  }
  return -1;
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
  DoorState& d = g.doors[static_cast<int>(options.door)];
  d.port.store(options.port);
  d.max_total.store(options.max_connections);
  d.max_per_peer.store(options.max_connections_per_peer);
  d.grace_ms.store(options.unauthenticated_grace_ms);
  if (g.reserve_fd < 0) g.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  d.enabled.store(true, std::memory_order_release);
}

void ConnectionGuard::UninstallForTest() {
  if (GuardState* g = g_state.load()) {
    for (DoorState& d : g->doors) d.enabled.store(false, std::memory_order_release);
  }
}

ConnectionGuardStats ConnectionGuard::Stats(Door door) {
  ConnectionGuardStats s;
  GuardState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return s;
  const DoorState& d = state->doors[static_cast<int>(door)];
  s.open = d.open.load();
  s.accepted = d.accepted.load();
  s.refused_total_cap = d.refused_total.load();
  s.refused_peer_cap = d.refused_peer.load();
  s.refused_no_fd = d.refused_fd.load();
  s.evicted_unauthenticated = d.evicted.load();
  return s;
}

void ConnectionGuard::MarkAuthenticated(Door door, absl::string_view grpc_peer) {
  GuardState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return;
  sockaddr_storage peer;
  if (!ParseGrpcPeer(grpc_peer, &peer)) return;
  uint64_t key = PeerKey(static_cast<int>(door), peer);
  GuardState& g = *state;
  std::lock_guard<std::mutex> lock(g.peers_mu);
  auto it = g.peers.find(key);
  if (it == g.peers.end()) return;
  auto [fd, generation] = it->second;
  g.peers.erase(it);
  Slot& slot = g.slots[fd];
  if (slot.generation.load(std::memory_order_relaxed) == generation) {
    slot.flags.fetch_or(kAuthenticated, std::memory_order_relaxed);
  }
}

namespace {

// The local end of socket `fd` as host:port; "" when it is not TCP.
std::string LocalAddressText(int fd) {
  sockaddr_storage local;
  socklen_t len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {};
  if (local.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&local);
    if (inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host)) == nullptr) return "";
    return absl::StrCat(host, ":", ntohs(in->sin_port));
  }
  if (local.ss_family != AF_INET6) return "";
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&local);
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    if (inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof(host)) == nullptr) return "";
    return absl::StrCat(host, ":", ntohs(in6->sin6_port));
  }
  if (inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)) == nullptr) return "";
  return absl::StrCat("[", host, "]:", ntohs(in6->sin6_port));
}

}  // namespace

std::string ConnectionGuard::DialedAddressOf(Door door, absl::string_view grpc_peer) {
  GuardState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return "";
  sockaddr_storage peer;
  if (!ParseGrpcPeer(grpc_peer, &peer)) return "";
  uint64_t key = PeerKey(static_cast<int>(door), peer);
  GuardState& g = *state;
  std::lock_guard<std::mutex> lock(g.peers_mu);
  auto it = g.peers.find(key);
  if (it == g.peers.end()) return "";
  auto [fd, generation] = it->second;
  // The entry's descriptor is this connection's while its slot's generation
  // is unchanged (a close and a reuse raise it). A close racing the read
  // below could name another connection's end: the answer is a hint (which
  // server an agent tries last), never a check.
  if (g.slots[fd].generation.load(std::memory_order_relaxed) != generation) return "";
  return LocalAddressText(fd);
}

int ConnectionGuard::Accept(int listener, sockaddr* addr, socklen_t* addr_len, int flags) {
  GuardState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return RawAccept4(listener, addr, addr_len, flags);
  GuardState& g = *state;
  int door = DoorOfPort(g, LocalPort(listener));
  if (door < 0) return RawAccept4(listener, addr, addr_len, flags);
  DoorState& d = g.doors[door];
  std::lock_guard<std::mutex> lock(g.accept_mu);
  // Loops until a connection is admitted or the queue is empty (EAGAIN on
  // a non-blocking listener), so an edge-triggered caller misses nothing.
  for (;;) {
    sockaddr_storage peer;
    socklen_t peer_len = sizeof(peer);
    int c = RawAccept4(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len, flags);
    if (c < 0) {
      if ((errno == EMFILE || errno == ENFILE) && ShedOneWithReserve(g, d, listener)) continue;
      return -1;
    }
    uint32_t bucket = PeerBucket(d, peer);
    if (bucket == kNoPeerCounter) {
      // Every counter counts a peer: an unauthenticated connection past its
      // grace (of any peer) makes room, as at the total cap, and its peer's
      // counter is free again when that was its last connection.
      SweepIfDue(g);
      if (EvictUnauthenticated(g, d, 0)) bucket = PeerBucket(d, peer);
    }
    Verdict v = bucket == kNoPeerCounter ? Verdict::kTotalCap : Judge(g, d, bucket);
    if (v != Verdict::kAdmit || c >= g.slot_count) {
      RawClose(c);
      if (v == Verdict::kPeerCap) {
        d.refused_peer.fetch_add(1, std::memory_order_relaxed);
        LogRefusal(g, d, "a peer reached its cap (maxConnectionsPerPeer / maxAgentConnectionsPerPeer)");
      } else if (bucket == kNoPeerCounter) {
        d.refused_total.fetch_add(1, std::memory_order_relaxed);
        LogRefusal(g, d, "65,536 addresses hold connections at it already");
      } else {
        d.refused_total.fetch_add(1, std::memory_order_relaxed);
        LogRefusal(g, d, "the port reached its cap (maxConnections / maxAgentConnections)");
      }
      continue;
    }
    Admit(g, door, c, peer, bucket);
    if (addr != nullptr && addr_len != nullptr) {
      std::memcpy(addr, &peer, std::min<socklen_t>(*addr_len, peer_len));
      *addr_len = peer_len;
    }
    return c;
  }
}

int ConnectionGuard::Close(int fd) {
  GuardState* g = g_state.load(std::memory_order_acquire);
  if (g != nullptr && fd >= 0 && fd < g->slot_count) {
    Slot& slot = g->slots[fd];
    if (slot.bucket.load(std::memory_order_relaxed) != 0) Forget(*g, fd);
    // An eviction may be shutting this descriptor down: the number must not
    // be reused before it is done (a few instructions; bounded all the same,
    // as a child forked mid-eviction has no evicting thread).
    for (int i = 0; i < 1000 && (slot.flags.load(std::memory_order_seq_cst) & kEvicting) != 0; ++i) sched_yield();
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
