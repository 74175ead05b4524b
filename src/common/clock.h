// Clock seam: daemons read time through a Clock so tests can drive it. The
// scheduler core never reads a clock; it is given `now` as an argument.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace trainyard {

class Clock {
 public:
  virtual ~Clock() = default;
  // Returns the current time.
  virtual absl::Time Now() const = 0;

  // A loop that sleeps in the OS (poll, epoll) until a deadline read from
  // this clock registers here to be woken when the clock jumps: moves other
  // than by the passing of real time, as a FakeClock's Advance. `on_jump`
  // runs on the thread that moved the clock, with the clock's lock held, so
  // it must be quick and must not call back into the clock. Returns an id for
  // RemoveJumpListener. The real clock never jumps and keeps nothing.
  virtual int AddJumpListener(std::function<void()> /*on_jump*/) const { return 0; }
  // Forgets a listener; once this returns it is not running and never runs
  // again. Unknown ids (0 included) are ignored.
  virtual void RemoveJumpListener(int /*id*/) const {}
};

// The wall clock.
class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : nanos_(absl::ToUnixNanos(start)) {}
  absl::Time Now() const override { return absl::FromUnixNanos(nanos_.load()); }
  // Moves the clock forward by `d`, then wakes the jump listeners.
  void Advance(absl::Duration d) {
    nanos_ += absl::ToInt64Nanoseconds(d);
    absl::MutexLock lock(&mu_);
    for (const auto& [id, on_jump] : listeners_) on_jump();
  }

  int AddJumpListener(std::function<void()> on_jump) const override {
    absl::MutexLock lock(&mu_);
    listeners_[next_listener_id_] = std::move(on_jump);
    return next_listener_id_++;
  }
  void RemoveJumpListener(int id) const override {
    absl::MutexLock lock(&mu_);
    listeners_.erase(id);
  }

 private:
  std::atomic<int64_t> nanos_;
  // Registering a listener does not change the time, so it is allowed on a
  // const clock (daemons hold `const Clock*`).
  mutable absl::Mutex mu_;
  mutable std::map<int, std::function<void()>> listeners_ ABSL_GUARDED_BY(mu_);
  mutable int next_listener_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace trainyard
