// The rule that spaces a task's restarts: exponential backoff from
// backoff_initial, doubling per restart up to backoff_max, and starting again
// from backoff_initial after an attempt that ran long enough to count as
// healthy. A pure function of its inputs (no clock, no process), so the rule
// is tested on its own and the supervisor only carries its state.
#pragma once

#include "absl/time/time.h"

namespace trainyard::agent {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(100);  // the first restart's delay
  absl::Duration max = absl::Seconds(30);            // no delay is longer
};

// What the rule decides after one attempt ended.
struct RestartDelay {
  absl::Duration delay;  // wait this long before the next attempt
  int streak = 0;        // pass back as `streak` after the next attempt
};

// Returns how long to wait before the next attempt after an attempt that ran
// for `ran`, where `streak` is what the previous call returned (0 after the
// first attempt): min(initial * 2^streak, max), except that an attempt that
// ran at least 2 * max resets the streak first, so the delay is `initial`
// again (a worker that crashes once a day should not wait the longest delay
// because it crashed before). REQUIRES: streak >= 0.
RestartDelay NextRestartDelay(const BackoffOptions& options, int streak, absl::Duration ran);

// How long an attempt must run for the next restart to wait `initial` again.
absl::Duration BackoffResetAfter(const BackoffOptions& options);

}  // namespace trainyard::agent
