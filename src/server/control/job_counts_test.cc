// JobCounts alone: queue and user counts follow jobs' states, and the
// per-user limits say which limit a user reached.
#include "server/control/job_counts.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

JobRt Job(const std::string& queue, const std::string& user, v1::JobState state) {
  JobRt job;
  job.rec.mutable_spec()->set_queue(queue);
  job.rec.mutable_spec()->set_user(user);
  job.rec.set_state(state);
  return job;
}

TEST(JobCountsTest, QueueAndUserCountsFollowAJobsStates) {
  JobCounts counts(0, 0);
  EXPECT_EQ(counts.queue("research"), nullptr);
  JobRt a = Job("research", "ana", v1::JOB_QUEUED);
  JobRt b = Job("research", "ben", v1::JOB_QUEUED);
  counts.Count(a);
  counts.Count(b);
  counts.Count(a);  // counted once, however often it is told
  ASSERT_NE(counts.queue("research"), nullptr);
  EXPECT_EQ(counts.queue("research")->pending, 2);
  EXPECT_EQ(counts.queue("research")->running, 0);
  EXPECT_EQ(counts.pending(), 2);
  EXPECT_EQ(counts.user_pending("ana"), 1);

  a.rec.set_state(v1::JOB_RUNNING);
  counts.Count(a);
  EXPECT_EQ(counts.queue("research")->pending, 1);
  EXPECT_EQ(counts.queue("research")->running, 1);
  EXPECT_EQ(counts.user_pending("ana"), 0);
  EXPECT_EQ(counts.pending(), 1);

  a.rec.set_state(v1::JOB_SUCCEEDED);
  b.rec.set_state(v1::JOB_KILLED);
  counts.Count(a);
  counts.Count(b);
  EXPECT_EQ(counts.queue("research")->pending, 0);
  EXPECT_EQ(counts.queue("research")->running, 0);
  EXPECT_EQ(counts.pending(), 0);
  EXPECT_EQ(counts.user_pending("ben"), 0);
}

TEST(JobCountsTest, PendingJobsPerUserCountPreparedOnesUntilTheStoreAnswers) {
  JobCounts counts(/*max_pending_per_user=*/2, 0);
  absl::Time now = absl::FromUnixSeconds(1000);
  JobRt queued = Job("default", "ana", v1::JOB_QUEUED);
  counts.Count(queued);
  ASSERT_TRUE(counts.CheckUser("ana", now).ok());
  counts.Prepared("ana");  // submitted, not yet durable
  absl::Status st = counts.CheckUser("ana", now);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("user ana has 2 jobs waiting to start"));
  EXPECT_THAT(st.message(), HasSubstr("maxPendingJobsPerUser 2"));
  EXPECT_TRUE(counts.CheckUser("ben", now).ok());  // per user
  counts.Answered("ana");  // refused by the store: no longer counted
  EXPECT_TRUE(counts.CheckUser("ana", now).ok());
}

TEST(JobCountsTest, TheSubmissionRateIsABucketPerUserAndAnArrayTakesAllOrNone) {
  JobCounts counts(0, /*max_submissions_per_second_per_user=*/3);
  absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(counts.CheckUser("ana", now, 2).ok());
  absl::Status st = counts.CheckUser("ana", now, 2);  // one token left: all or none
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("submits faster than the 3 jobs a second"));
  EXPECT_TRUE(counts.CheckUser("ana", now, 1).ok());
  EXPECT_FALSE(counts.CheckUser("ana", now, 1).ok());
  EXPECT_TRUE(counts.CheckUser("ben", now, 3).ok());
  EXPECT_TRUE(counts.CheckUser("ana", now + absl::Seconds(1), 3).ok());  // refilled
  st = counts.CheckUser("ana", now + absl::Seconds(10), 4);
  EXPECT_THAT(st.message(), HasSubstr("an array of 4 elements is more than the 3 jobs a second"));
  EXPECT_TRUE(counts.CheckUser("ana", now + absl::Seconds(10), 0).ok());  // an array's later elements
}

}  // namespace
}  // namespace trainyard::server
