// DeadlineWatch alone: started jobs with a limit come due in order, once;
// ended, unlimited and unwatched jobs never do.
#include "server/control/deadline_watch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::JobRecord Started(const std::string& name, int64_t start_ms, int64_t limit_ms) {
  v1::JobRecord rec;
  rec.set_name(name);
  rec.set_state(v1::JOB_RUNNING);
  rec.set_start_time_ms(start_ms);
  rec.mutable_spec()->set_active_deadline_ms(limit_ms);
  return rec;
}

TEST(DeadlineWatchTest, JobsComeDueInTheOrderTheirLimitsRunOutAndOnce) {
  DeadlineWatch watch;
  watch.Watch(Started("late", 1000, 5000));
  watch.Watch(Started("early", 1000, 1000));
  watch.Watch(Started("none", 1000, 0));  // no limit: never due
  v1::JobRecord ended = Started("ended", 1000, 1000);
  ended.set_state(v1::JOB_SUCCEEDED);
  watch.Watch(ended);
  EXPECT_THAT(watch.TakeDue(absl::FromUnixMillis(1999)), IsEmpty());
  EXPECT_THAT(watch.TakeDue(absl::FromUnixMillis(2000)), ElementsAre("early"));
  EXPECT_THAT(watch.TakeDue(absl::FromUnixMillis(4000)), IsEmpty());
  EXPECT_THAT(watch.TakeDue(absl::FromUnixMillis(60000)), ElementsAre("late"));
  EXPECT_THAT(watch.TakeDue(absl::FromUnixMillis(60000)), IsEmpty());
}

TEST(DeadlineWatchTest, AnUnwatchedJobIsNeverDue) {
  DeadlineWatch watch;
  v1::JobRecord a = Started("a", 1000, 1000), b = Started("b", 1000, 1000);
  watch.Watch(a);
  watch.Watch(b);
  watch.Unwatch(a);
  EXPECT_THAT(watch.TakeDue(absl::FromUnixMillis(5000)), ElementsAre("b"));
}

TEST(DeadlineWatchTest, TheEndMessageNamesTheLimitAndTheStart) {
  EXPECT_EQ(DeadlineWatch::Why(Started("a", 1796688000000, 120000)),
            "ran past its activeDeadline of 2m (started at 2026-12-08T00:00:00Z)");
}

}  // namespace
}  // namespace trainyard::server
