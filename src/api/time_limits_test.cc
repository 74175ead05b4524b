// Time limits as a user writes and reads them: the durations accepted, when a
// started job's limit runs out, and describe's "Time limit" line.
#include "api/time_limits.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(TimeLimitsTest, DurationsReadAndWrittenBack) {
  EXPECT_EQ(*ParseTimeLimit("2h"), 7'200'000);
  EXPECT_EQ(*ParseTimeLimit(" 1h30m "), 5'400'000);
  EXPECT_EQ(TimeLimitText(5'400'000), "1h30m");
  EXPECT_EQ(TimeLimitText(90'000), "1m30s");
  EXPECT_EQ(ParseTimeLimit("inf").status().message(), "'inf' is not a duration like 2h, 30m, 90s or 1h30m");
  EXPECT_EQ(ParseTimeLimit("0").status().message(), "'0' is not a duration like 2h, 30m, 90s or 1h30m");
  EXPECT_EQ(ParseTimeLimit("10us").status().message(), "'10us' is below 1ms");
}

TEST(TimeLimitsTest, TheDeadlineIsTheFirstStartPlusTheLimit) {
  v1::JobRecord job;
  job.mutable_spec()->set_active_deadline_ms(10'000);
  EXPECT_EQ(DeadlineMs(job), 0) << "not started: nothing is counted yet";
  job.set_start_time_ms(1'000'000);
  EXPECT_EQ(DeadlineMs(job), 1'010'000);
  job.mutable_spec()->set_active_deadline_ms(0);
  EXPECT_EQ(DeadlineMs(job), 0) << "no limit";
}

TEST(TimeLimitsTest, DescribeShowsTheLimitAndWhatIsLeft) {
  v1::JobView v;
  v.set_state(v1::JOB_RUNNING);
  EXPECT_EQ(TimeLimitLine(v, 0), "none");
  v.set_active_deadline_ms(7'200'000);
  v.set_state(v1::JOB_QUEUED);
  EXPECT_EQ(TimeLimitLine(v, 0), "2h (counted from when the job starts running)");
  v.set_state(v1::JOB_RUNNING);
  v.set_deadline_unix_ms(10'000'000);
  EXPECT_EQ(TimeLimitLine(v, 10'000'000 - 4'325'400), "2h (1h12m5s left)");
  EXPECT_EQ(*TimeLeftMs(v, 10'000'000 - 4'325'400), 4'325'400);
  EXPECT_EQ(*TimeLeftMs(v, 10'000'001), 0) << "never negative";
  v.set_state(v1::JOB_DEADLINE_EXCEEDED);
  EXPECT_EQ(TimeLimitLine(v, 10'000'001), "2h (exceeded)");
  EXPECT_FALSE(TimeLeftMs(v, 0).has_value()) << "an ended job has nothing left to count";
  v.set_state(v1::JOB_SUCCEEDED);
  EXPECT_EQ(TimeLimitLine(v, 0), "2h");
}

}  // namespace
}  // namespace trainyard::api
