// JobRetention alone: finished jobs come due in the order they ended, past
// the retention only; a deleted job is held until its rename is written,
// then purged past the accounting retention; an expired job's name is freed
// by that write.
#include "server/control/job_retention.h"

#include <memory>

#include "gtest/gtest.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
namespace {

v1::JobRecord Ended(const std::string& name, uint64_t id, absl::Time end) {
  v1::JobRecord rec;
  rec.set_name(name);
  rec.set_id(id);
  rec.set_state(v1::JOB_SUCCEEDED);
  rec.set_end_time_ms(absl::ToUnixMillis(end));
  return rec;
}

const absl::Time kRetentionStart = absl::FromUnixSeconds(1796688000);

TEST(JobRetentionTest, FinishedJobsComeDueOldestFirstOncePastTheRetention) {
  JobRetention r(/*finished_retention_minutes=*/10, /*accounting_retention_days=*/1);
  r.Finished(Ended("late", 2, kRetentionStart + absl::Minutes(5)));
  r.Finished(Ended("early", 1, kRetentionStart));
  EXPECT_TRUE(r.Due(kRetentionStart));
  EXPECT_FALSE(r.NextExpired(kRetentionStart + absl::Minutes(10)).has_value());  // not past it yet
  auto first = r.NextExpired(kRetentionStart + absl::Minutes(11));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->second, "early");
  EXPECT_FALSE(r.NextExpired(kRetentionStart + absl::Minutes(11)).has_value());
  r.PutBack(first->first, first->second);  // could not be deleted yet
  auto again = r.NextExpired(kRetentionStart + absl::Minutes(20));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->second, "early");
  EXPECT_EQ(r.NextExpired(kRetentionStart + absl::Minutes(20))->second, "late");

  r.TurnTaken(kRetentionStart);
  EXPECT_FALSE(r.Due(kRetentionStart + absl::Seconds(59)));
  EXPECT_TRUE(r.Due(kRetentionStart + absl::Minutes(1)));
  r.MoreDue(kRetentionStart + absl::Seconds(1));
  EXPECT_TRUE(r.Due(kRetentionStart + absl::Seconds(1)));
}

TEST(JobRetentionTest, WithNoRetentionFinishedJobsStay) {
  JobRetention r(0, 1);
  r.Finished(Ended("a", 1, kRetentionStart));
  EXPECT_FALSE(r.NextExpired(kRetentionStart + absl::Hours(1000)).has_value());
}

TEST(JobRetentionTest, ADeletedJobIsHeldUntilItsRenameIsWrittenThenPurgedPastTheAccountingRetention) {
  JobRetention r(10, /*accounting_retention_days=*/2);
  auto job = std::make_unique<JobRt>();
  job->rec = Ended("train#7", 7, kRetentionStart);
  r.HoldDeleted("train#7", std::move(job));
  ASSERT_NE(r.Deleted("train#7"), nullptr);
  EXPECT_EQ(r.Deleted("train#7")->rec.id(), 7u);
  EXPECT_TRUE(r.TakePurges(kRetentionStart + absl::Hours(100), 20).empty());  // not in the store yet
  r.Expired("train#7", "train");
  EXPECT_EQ(r.Written("train#7"), "train");  // the expired job's name is free
  EXPECT_EQ(r.Deleted("train#7"), nullptr);
  EXPECT_FALSE(r.Written("train#7").has_value());
  EXPECT_TRUE(r.TakePurges(kRetentionStart + absl::Hours(47), 20).empty());
  EXPECT_EQ(r.TakePurges(kRetentionStart + absl::Hours(49), 20), std::vector<uint64_t>{7});
  EXPECT_TRUE(r.TakePurges(kRetentionStart + absl::Hours(49), 20).empty());
  r.PurgeFailed(7);  // asked again
  EXPECT_EQ(r.TakePurges(kRetentionStart + absl::Hours(49), 20), std::vector<uint64_t>{7});
}

TEST(JobRetentionTest, PurgesTakeAtMostTheTurnsBudget) {
  JobRetention r(10, 1);
  for (uint64_t id = 1; id <= 5; ++id) r.Stored(Ended("j#" + std::to_string(id), id, kRetentionStart));
  EXPECT_EQ(r.TakePurges(kRetentionStart + absl::Hours(25), 3).size(), 3u);
  EXPECT_EQ(r.TakePurges(kRetentionStart + absl::Hours(25), 0).size(), 0u);
  EXPECT_EQ(r.TakePurges(kRetentionStart + absl::Hours(25), 3).size(), 2u);
}

}  // namespace
}  // namespace trainyard::server
