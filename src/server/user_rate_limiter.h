// Per-user rate limits on the client calls that cost the server the most
// (config block `rateLimits`, server/config.h): a token bucket per user and
// kind of call, so one user's loop of submissions, job listings, log reads
// or token requests cannot take the server's time from everyone else.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/token_bucket.h"
#include "security/principal.h"
#include "server/config.h"

namespace trainyard::server {

class UserRateLimiter {
 public:
  enum Call { kSubmit, kListJobs, kLogs, kCreateToken, kCalls };

  explicit UserRateLimiter(const UserRateLimits& limits);

  // OK when `who` may make `call` at `now`, taking one call from its
  // bucket; else RESOURCE_EXHAUSTED naming the limit (rateLimits.KEY) and
  // when to try again. Anonymous callers (authentication off) are not
  // limited, nor admins but for createToken.
  absl::Status Allow(const security::Principal& who, Call call, absl::Time now);
  // Calls of kind `call` refused so far (for /metrics).
  int64_t Refused(Call call) const { return refused_[call].load(std::memory_order_relaxed); }
  // The config key of `call` ("submit", "listJobs", "logs", "createToken").
  static const char* KeyName(Call call);

 private:
  // Forgets full buckets (users idle for a burst's time) once there are many.
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  double rate_[kCalls];
  double burst_[kCalls];
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<std::string, int>, TokenBucket> buckets_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> refused_[kCalls] = {};
};

}  // namespace trainyard::server
