// Token buckets per (user, kind of call).
#include "server/user_rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::server {
namespace {
constexpr size_t kPruneAbove = 10000;  // buckets held before full ones are forgotten
}  // namespace

UserRateLimiter::UserRateLimiter(const UserRateLimits& l) {
  rate_[kSubmit] = l.submit;
  rate_[kListJobs] = l.list_jobs;
  rate_[kLogs] = l.logs;
  rate_[kCreateToken] = l.create_token;
  for (int c = 0; c < kCalls; ++c) burst_[c] = std::max(1.0, rate_[c] * l.burst_seconds);
}

const char* UserRateLimiter::KeyName(Call call) {
  static constexpr const char* kNames[kCalls] = {"submit", "listJobs", "logs", "createToken"};
  return kNames[call];
}

absl::Status UserRateLimiter::Allow(const security::Principal& who, Call call, absl::Time now) {
  double rate = rate_[call];
  // Admins' dashboards and scripts are not limited, but token issuance (a
  // write of the token file each) is, for everyone.
  if (rate <= 0 || who.anonymous || (who.admin && call != kCreateToken)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (buckets_.size() > kPruneAbove) PruneLocked(now);
  TokenBucket& b = buckets_[{who.user, call}];
  if (b.Take(now, rate, burst_[call])) return absl::OkStatus();
  refused_[call].fetch_add(1, std::memory_order_relaxed);
  double wait = b.SecondsToNext(rate);
  return absl::ResourceExhaustedError(absl::StrFormat(
      "user %s is over the rate limit rateLimits.%s of this server (%g calls a second per user, bursts of %g): "
      "try again in %.1f s",
      who.user, KeyName(call), rate, burst_[call], std::ceil(wait * 10) / 10));
}

void UserRateLimiter::PruneLocked(absl::Time now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    int call = it->first.second;
    bool full = it->second.LevelAt(now, rate_[call], burst_[call]) >= burst_[call];
    if (full) {
      buckets_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace trainyard::server
