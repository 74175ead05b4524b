// WaitUntil: how a test waits for what another thread or process does. It
// polls a condition with a deadline, never sleeps and hopes; every test room
// uses this one (docs/architecture.md, "Tests").
#pragma once

#include <algorithm>
#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace trainyard {

// Returns true once `condition` holds, false if it still does not when
// `timeout` has passed (it is asked once more then). It is asked at once, then
// after 1 ms, and the pause doubles up to `every`: what comes quickly is seen
// quickly, and a costly condition (one that runs a command) runs at most
// once per `every` after the first few.
inline bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(10),
                      absl::Duration every = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = std::min(absl::Milliseconds(1), every);
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(std::min(pause, deadline - absl::Now()));
    pause = std::min(pause * 2, every);
  }
  return condition();
}

}  // namespace trainyard
