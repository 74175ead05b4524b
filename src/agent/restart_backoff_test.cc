// The restart backoff rule on its own: the first restart, doubling, the cap,
// and starting again from backoff_initial after an attempt that ran long.
#include "agent/restart_backoff.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;

constexpr BackoffOptions kOptions{.initial = absl::Milliseconds(10), .max = absl::Milliseconds(40)};

// The delays before each restart after attempts that ran `runs`, in order.
std::vector<absl::Duration> Delays(const BackoffOptions& options, const std::vector<absl::Duration>& runs) {
  std::vector<absl::Duration> delays;
  int streak = 0;
  for (absl::Duration ran : runs) {
    RestartDelay next = NextRestartDelay(options, streak, ran);
    delays.push_back(next.delay);
    streak = next.streak;
  }
  return delays;
}

TEST(RestartBackoff, FirstRestartWaitsBackoffInitialHoweverLongTheFirstAttemptRan) {
  EXPECT_EQ(NextRestartDelay(kOptions, 0, absl::ZeroDuration()).delay, absl::Milliseconds(10));
  EXPECT_EQ(NextRestartDelay(kOptions, 0, absl::Milliseconds(79)).delay, absl::Milliseconds(10));
  EXPECT_EQ(NextRestartDelay(kOptions, 0, absl::Hours(24)).delay, absl::Milliseconds(10));
  EXPECT_EQ(NextRestartDelay(kOptions, 0, absl::ZeroDuration()).streak, 1);
}

TEST(RestartBackoff, DoublesForEachQuickFailureUpToTheCap) {
  std::vector<absl::Duration> quick(6, absl::Milliseconds(1));
  EXPECT_THAT(Delays(kOptions, quick),
              ElementsAre(absl::Milliseconds(10), absl::Milliseconds(20), absl::Milliseconds(40),
                          absl::Milliseconds(40), absl::Milliseconds(40), absl::Milliseconds(40)));
}

TEST(RestartBackoff, CapIsNotADoublingStep) {
  // 30 ms doubles to 60 ms, over the 40 ms cap: the cap itself is used.
  BackoffOptions options{.initial = absl::Milliseconds(30), .max = absl::Milliseconds(40)};
  EXPECT_THAT(Delays(options, {absl::ZeroDuration(), absl::ZeroDuration()}),
              ElementsAre(absl::Milliseconds(30), absl::Milliseconds(40)));
  // An initial delay above the cap is capped too.
  EXPECT_EQ(NextRestartDelay({.initial = absl::Seconds(5), .max = absl::Seconds(1)}, 0, absl::ZeroDuration()).delay,
            absl::Seconds(1));
}

TEST(RestartBackoff, AnAttemptThatRanTwiceTheCapStartsAgainFromInitial) {
  EXPECT_EQ(BackoffResetAfter(kOptions), absl::Milliseconds(80));
  // Attempts 0-2 fail at once, attempt 3 runs exactly 2 x backoff_max.
  EXPECT_THAT(Delays(kOptions, {absl::ZeroDuration(), absl::ZeroDuration(), absl::ZeroDuration(),
                                absl::Milliseconds(80), absl::ZeroDuration()}),
              ElementsAre(absl::Milliseconds(10), absl::Milliseconds(20), absl::Milliseconds(40),
                          absl::Milliseconds(10), absl::Milliseconds(20)));
}

TEST(RestartBackoff, AnAttemptJustShorterThanTwiceTheCapKeepsDoubling) {
  EXPECT_THAT(Delays(kOptions, {absl::ZeroDuration(), absl::Milliseconds(79), absl::Milliseconds(79)}),
              ElementsAre(absl::Milliseconds(10), absl::Milliseconds(20), absl::Milliseconds(40)));
}

TEST(RestartBackoff, LongStreaksStayAtTheCap) {
  EXPECT_EQ(NextRestartDelay(kOptions, 1000000, absl::ZeroDuration()).delay, absl::Milliseconds(40));
  EXPECT_EQ(NextRestartDelay({.initial = absl::ZeroDuration(), .max = absl::Seconds(1)}, 50, absl::ZeroDuration()).delay,
            absl::ZeroDuration());
}

}  // namespace
}  // namespace trainyard::agent
