// What strangers' NodeJoin calls may cost the server (docs/security.md,
// "Join tokens"): JoinNode is the one call anyone who reaches the port may
// make. Each peer address has a token bucket of refusals; a peer whose
// bucket is empty is answered RESOURCE_EXHAUSTED before its token is read.
// Refusals are counted by reason (trainyard_join_requests_total on
// /metrics) and logged at most once per interval, with the count since the
// last line, so a flood of bad tokens neither fills the log nor the disk.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/token_bucket.h"

namespace trainyard::server {

struct JoinGuardOptions {
  int burst = 5;                      // refusals a peer may have in a row
  double refill_per_second = 0.5;     // refusals given back per second
  absl::Duration log_interval = absl::Seconds(10);
  size_t max_peers = 4096;            // peers remembered (the idlest forgotten)
};

// Joins answered by every JoinService of this process since it started,
// by outcome: joined; refused for the token (unknown, another node's,
// used, expired), for the request (a node name or certificate request
// that cannot be signed, a field too long) or for the peer's rate.
struct JoinCounts {
  int64_t joined = 0;
  int64_t refused_token = 0;
  int64_t refused_request = 0;
  int64_t refused_rate = 0;
};

class JoinGuard {
 public:
  enum class Refusal { kToken, kRequest };

  explicit JoinGuard(JoinGuardOptions options = {}) : options_(options) {}

  // OK when `peer` (gRPC's peer string: its port is ignored) may try a
  // join at `now`; else ResourceExhausted saying when to try again
  // (counted as refused for the rate).
  absl::Status Admit(const std::string& peer, absl::Time now);

  // Records a refused join of `peer`: takes one from its bucket and counts
  // it. Returns the line to log now (the first: "refused a join from PEER:
  // WHY ..."; later ones "refused N join(s) in the last 12s; the latest
  // from PEER: WHY"), or "" when a line went out less than the
  // log interval ago (this refusal is then in the next line's count).
  std::string Refused(const std::string& peer, Refusal reason, absl::string_view why, absl::Time now);

  // Counts a join that got its certificate.
  void Joined();

  // The counts of every guard of this process (for /metrics).
  static JoinCounts Totals();

 private:
  // The bucket of `host` refilled to `now` (a new, full one for a new host).
  TokenBucket& Refill(const std::string& host, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JoinGuardOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, TokenBucket> peers_ ABSL_GUARDED_BY(mu_);
  absl::Time last_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;  // refusals since the last line
};

}  // namespace trainyard::server
