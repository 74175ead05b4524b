// The restart backoff rule (restart_backoff.h).
#include "agent/restart_backoff.h"

#include <algorithm>

namespace trainyard::agent {

absl::Duration BackoffResetAfter(const BackoffOptions& options) { return 2 * options.max; }

RestartDelay NextRestartDelay(const BackoffOptions& options, int streak, absl::Duration ran) {
  if (ran >= BackoffResetAfter(options)) streak = 0;
  // Doubling stops at the cap, so a long streak cannot overflow the delay.
  absl::Duration delay = options.initial;
  for (int i = 0; i < streak && delay > absl::ZeroDuration() && delay < options.max; ++i) delay *= 2;
  return {.delay = std::min(delay, options.max), .streak = streak + 1};
}

}  // namespace trainyard::agent
