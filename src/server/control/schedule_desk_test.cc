// ScheduleDesk alone, with explicit time and a set of live runs standing in
// for the jobs: what a schedule's user sees (views, runs, errors), what is
// written to the store, and the runs a new one replaces.
#include "server/control/schedule_desk.h"

#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kScheduleDeskT0 = absl::FromCivil(absl::CivilSecond(2026, 12, 7, 6, 0, 30), absl::UTCTimeZone());

v1::ScheduleRecord Rec(const std::string& name, const std::string& cron,
                       v1::ConcurrencyPolicy concurrency = v1::CONCURRENCY_SKIP) {
  v1::ScheduleRecord rec;
  rec.set_name(name);
  rec.set_user("ana");
  rec.set_cron(cron);
  rec.set_concurrency(concurrency);
  rec.mutable_spec()->set_queue("research");
  rec.mutable_spec()->add_replicas()->add_command("./train");
  return rec;
}

// The metadata keys a batch writes ("-key" for a deletion).
std::vector<std::string> Keys(const WriteBatch& batch) {
  std::vector<std::string> keys;
  for (const WriteBatch::Op& op : batch.ops()) {
    if (const auto* m = std::get_if<WriteBatch::PutMetaOp>(&op)) keys.push_back(m->key);
    if (const auto* m = std::get_if<WriteBatch::DeleteMetaOp>(&op)) keys.push_back("-" + m->key);
  }
  return keys;
}

class ScheduleDeskTest : public ::testing::Test {
 protected:
  std::set<std::string> live_;  // the runs that have not ended
  ScheduleDesk desk_{absl::Seconds(60), [this](const std::string& run) { return live_.count(run) > 0; }};
  WriteBatch batch_;
};

TEST_F(ScheduleDeskTest, ASchedulesCreationIsWrittenAndItsViewHidesTheSpecButItsQueue) {
  absl::StatusOr<v1::ScheduleView> view = desk_.Create(Rec("nightly", "0 2 * * *"), kScheduleDeskT0, &batch_);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(Keys(batch_), ElementsAre("schedule/nightly"));
  EXPECT_EQ(view->schedule().spec().queue(), "research");
  EXPECT_EQ(view->schedule().spec().replicas_size(), 0) << "every user reads the views: not its commands";
  EXPECT_EQ(view->next_run_unix_ms(), absl::ToUnixMillis(kScheduleDeskT0 + absl::Hours(20) - absl::Seconds(30)));

  absl::Status refused = desk_.Create(Rec("often", "* * * * * *"), kScheduleDeskT0, &batch_).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("scheduleMinIntervalSeconds"));
  EXPECT_EQ(desk_.Find("often"), nullptr);
  EXPECT_EQ(desk_.Update("nosuch", v1::SCHEDULE_PAUSE, kScheduleDeskT0, nullptr, &batch_).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ScheduleDeskTest, ADueRunWhileTheLastLivesIsSkippedQueuedBesideItOrReplacesIt) {
  ASSERT_TRUE(desk_.Create(Rec("skip", "* * * * *"), kScheduleDeskT0, &batch_).ok());
  ASSERT_TRUE(desk_.Create(Rec("queue", "* * * * *", v1::CONCURRENCY_QUEUE), kScheduleDeskT0, &batch_).ok());
  ASSERT_TRUE(desk_.Create(Rec("replace", "* * * * *", v1::CONCURRENCY_REPLACE), kScheduleDeskT0, &batch_).ok());
  std::vector<ScheduleDesk::Replaced> replaced;
  std::vector<ScheduleFire> first = desk_.TakeDue(kScheduleDeskT0 + absl::Seconds(31), &replaced, &batch_);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_THAT(replaced, IsEmpty());
  for (const ScheduleFire& f : first) {
    std::string job = absl::StrCat(f.name, "-1");
    live_.insert(job);
    desk_.RunDone(f, job, &batch_);
  }

  std::vector<ScheduleFire> second = desk_.TakeDue(kScheduleDeskT0 + absl::Seconds(91), &replaced, &batch_);
  std::vector<std::string> fired;
  for (const ScheduleFire& f : second) fired.push_back(f.name);
  EXPECT_THAT(fired, ElementsAre("queue", "replace"));
  EXPECT_THAT(second[0].message, HasSubstr("beside queue-1, not ended"));
  ASSERT_EQ(replaced.size(), 1u) << "the control state ends it";
  EXPECT_EQ(replaced[0].run, "replace-1");
  EXPECT_EQ(replaced[0].schedule, "replace");
  const v1::ScheduleRecord* skip = desk_.Find("skip");
  ASSERT_EQ(skip->runs_size(), 2);
  EXPECT_EQ(skip->runs(1).outcome(), "skipped");
  EXPECT_THAT(skip->runs(1).message(), HasSubstr("skip-1 has not ended (concurrency: skip)"));

  EXPECT_EQ(desk_.ViewOf(*desk_.Find("queue")).live_jobs_size(), 1);
  // The control state ended the replaced run. The second runs are not
  // answered yet: they count as running, with no job to end.
  live_.erase("replace-1");
  replaced.clear();
  std::vector<ScheduleFire> third = desk_.TakeDue(kScheduleDeskT0 + absl::Seconds(151), &replaced, &batch_);
  ASSERT_EQ(third.size(), 2u);
  EXPECT_THAT(third[0].message, HasSubstr("beside queue-1, a run being submitted, not ended"));
  EXPECT_THAT(replaced, IsEmpty());
  EXPECT_EQ(desk_.Find("skip")->runs(2).outcome(), "skipped");

  live_.clear();  // every run ended
  for (const ScheduleFire& f : second) desk_.RunDone(f, absl::StrCat(f.name, "-2"), &batch_);
  for (const ScheduleFire& f : third) desk_.RunDone(f, absl::StrCat(f.name, "-3"), &batch_);
  replaced.clear();
  EXPECT_EQ(desk_.TakeDue(kScheduleDeskT0 + absl::Seconds(211), &replaced, &batch_).size(), 3u);
  EXPECT_THAT(replaced, IsEmpty());
  EXPECT_EQ(desk_.ViewOf(*desk_.Find("queue")).live_jobs_size(), 0);
}

TEST_F(ScheduleDeskTest, ARunBeingSubmittedCountsAsLiveUntilItsAnswerAndARefusalIsKept) {
  ASSERT_TRUE(desk_.Create(Rec("m", "* * * * *"), kScheduleDeskT0, &batch_).ok());
  std::vector<ScheduleDesk::Replaced> replaced;
  std::vector<ScheduleFire> fires;
  ASSERT_TRUE(desk_.Update("m", v1::SCHEDULE_RUN, kScheduleDeskT0, &fires, &batch_).ok());
  ASSERT_EQ(fires.size(), 1u);
  EXPECT_TRUE(fires[0].by_hand);
  EXPECT_THAT(desk_.TakeDue(kScheduleDeskT0 + absl::Seconds(31), &replaced, &batch_), IsEmpty())
      << "the run by hand is not answered yet";
  desk_.RunDone(fires[0], absl::ResourceExhaustedError("queue research is full"), &batch_);
  const v1::ScheduleRecord* m = desk_.Find("m");
  ASSERT_EQ(m->runs_size(), 2);
  EXPECT_EQ(m->runs(1).outcome(), "refused");
  EXPECT_EQ(m->runs(1).message(), "queue research is full");
  EXPECT_EQ(desk_.TakeDue(kScheduleDeskT0 + absl::Seconds(91), &replaced, &batch_).size(), 1u);
}

TEST_F(ScheduleDeskTest, ABatchTakesAFewSchedulesWritesAndAFailedOneIsWrittenAgain) {
  for (size_t i = 0; i < Schedules::kWritesPerBatch + 4; ++i) {
    ASSERT_TRUE(desk_.Create(Rec(absl::StrCat("s", i), "@daily"), kScheduleDeskT0, &batch_).ok());
  }
  EXPECT_EQ(Keys(batch_).size(), Schedules::kWritesPerBatch) << "one etcd transaction's worth";
  desk_.BatchTaken();
  WriteBatch next;
  desk_.Write(&next);
  EXPECT_EQ(Keys(next).size(), 4u);
  desk_.BatchTaken();
  desk_.Rewrite("schedule/s3");
  WriteBatch again;
  desk_.Write(&again);
  EXPECT_THAT(Keys(again), ElementsAre("schedule/s3"));
  ViewStore views;
  desk_.Publish(&views, kScheduleDeskT0);
  EXPECT_EQ(views.Schedules()->size(), Schedules::kWritesPerBatch + 4);
}

}  // namespace
}  // namespace trainyard::server
