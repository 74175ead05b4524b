// The join guard (see join_guard.h).
#include "server/join_guard.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"

namespace trainyard::server {
namespace {

std::atomic<int64_t> g_joined{0};
std::atomic<int64_t> g_refused_token{0};
std::atomic<int64_t> g_refused_request{0};
std::atomic<int64_t> g_refused_rate{0};

// The host of gRPC's peer string ("ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7",
// "ipv6:[::1]:51234" -> "ipv6:[::1]"): a peer's new connections share one
// bucket. A peer string without a port (a Unix socket) is kept whole.
std::string PeerHost(const std::string& peer) {
  if (peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) return peer;
  size_t colon = peer.rfind(':');
  return colon == std::string::npos || colon < 5 ? peer : peer.substr(0, colon);
}

}  // namespace

TokenBucket& JoinGuard::Refill(const std::string& host, absl::Time now) {
  auto it = peers_.find(host);
  if (it == peers_.end()) {
    if (peers_.size() >= options_.max_peers) {
      // Forget the peer with the most refusals left (the least suspicious):
      // a flood from many addresses cannot reset one that is spent.
      auto idlest = std::max_element(peers_.begin(), peers_.end(), [&](const auto& a, const auto& b) {
        return a.second.LevelAt(now, options_.refill_per_second, options_.burst) <
               b.second.LevelAt(now, options_.refill_per_second, options_.burst);
      });
      peers_.erase(idlest);
    }
    it = peers_.try_emplace(host).first;  // never refilled: full
  }
  TokenBucket& b = it->second;
  b.Refill(now, options_.refill_per_second, options_.burst);
  return b;
}

absl::Status JoinGuard::Admit(const std::string& peer, absl::Time now) {
  absl::MutexLock lock(&mu_);
  TokenBucket& b = Refill(PeerHost(peer), now);
  if (b.tokens >= 1) return absl::OkStatus();
  g_refused_rate.fetch_add(1, std::memory_order_relaxed);
  double wait = b.SecondsToNext(options_.refill_per_second);
  return absl::ResourceExhaustedError(
      absl::StrCat("too many refused joins from this address; try again in ", static_cast<int>(wait) + 1, " s"));
}

std::string JoinGuard::Refused(const std::string& peer, Refusal reason, absl::string_view why, absl::Time now) {
  (reason == Refusal::kToken ? g_refused_token : g_refused_request).fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  TokenBucket& b = Refill(PeerHost(peer), now);
  b.tokens = std::max(0.0, b.tokens - 1);
  ++unlogged_;
  if (now - last_log_ < options_.log_interval) return "";
  std::string line = last_log_ == absl::InfinitePast()
                         ? absl::StrCat("refused a join from ", peer, ": ", why, " (refusals are logged at most once every ",
                                        absl::FormatDuration(options_.log_interval), ", with their count)")
                         : absl::StrCat("refused ", unlogged_, " join(s) in the last ",
                                        absl::FormatDuration(absl::Trunc(now - last_log_, absl::Seconds(1))),
                                        "; the latest from ", peer, ": ", why);
  last_log_ = now;
  unlogged_ = 0;
  return line;
}

void JoinGuard::Joined() { g_joined.fetch_add(1, std::memory_order_relaxed); }

JoinCounts JoinGuard::Totals() {
  return {.joined = g_joined.load(std::memory_order_relaxed),
          .refused_token = g_refused_token.load(std::memory_order_relaxed),
          .refused_request = g_refused_request.load(std::memory_order_relaxed),
          .refused_rate = g_refused_rate.load(std::memory_order_relaxed)};
}

}  // namespace trainyard::server
