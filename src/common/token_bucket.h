// A token bucket as a value: `rate` tokens a second up to `burst`, time
// passed in. The one home of the arithmetic behind every rate limit of the
// server (per-user submissions, per-user calls, per-peer join refusals);
// the owner keeps one per key and its own lock.
#pragma once

#include <algorithm>

#include "absl/time/time.h"

namespace trainyard {

struct TokenBucket {
  double tokens = 0;
  absl::Time refilled = absl::InfinitePast();  // never refilled: starts full

  // The tokens there would be at `now` (at most `burst`), without changing
  // the bucket. A bucket never refilled is full.
  double LevelAt(absl::Time now, double rate, double burst) const {
    if (refilled == absl::InfinitePast()) return burst;
    return std::min(burst, tokens + rate * std::max(0.0, absl::ToDoubleSeconds(now - refilled)));
  }
  // Brings the bucket to `now`. A `now` before the last refill (a clock
  // that stepped back) adds nothing.
  void Refill(absl::Time now, double rate, double burst) {
    tokens = LevelAt(now, rate, burst);
    refilled = refilled == absl::InfinitePast() ? now : std::max(refilled, now);
  }
  // Refills to `now` and takes one token when there is one. False: none.
  bool Take(absl::Time now, double rate, double burst) {
    Refill(now, rate, burst);
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
  // Seconds until one token is there again at `rate` (0 when one is).
  double SecondsToNext(double rate) const { return tokens >= 1 || rate <= 0 ? 0 : (1 - tokens) / rate; }
};

}  // namespace trainyard
