// Schedules as the control state keeps them: what a creation refuses, when
// each comes due (and how many runs a down server missed), pause and
// resume, the history's bound, and the records written and read back.
#include "server/schedules.h"

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

const absl::Time kSchedulesT0 = absl::FromCivil(absl::CivilSecond(2026, 12, 5, 6, 0, 30), absl::UTCTimeZone());

v1::ScheduleRecord SchedulesRec(const std::string& name, const std::string& cron, const std::string& user = "ana") {
  v1::ScheduleRecord rec;
  rec.set_name(name);
  rec.set_user(user);
  rec.set_cron(cron);
  rec.mutable_spec()->set_name("ignored");
  return rec;
}

TEST(SchedulesTest, CreationRefusesBadNamesCronsZonesAndDuplicatesNamingTheField) {
  Schedules s;
  EXPECT_THAT(std::string(s.Create(SchedulesRec("Nightly", "@daily"), kSchedulesT0).message()), HasSubstr("name: 'Nightly' must be"));
  EXPECT_THAT(std::string(s.Create(SchedulesRec(std::string(41, 'a'), "@daily"), kSchedulesT0).message()), HasSubstr("must be 1-40"));
  EXPECT_THAT(std::string(s.Create(SchedulesRec("n", "0 25 * * *"), kSchedulesT0).message()),
              HasSubstr("cron: field 2 (hour): 25 is outside 0-23"));
  EXPECT_THAT(std::string(s.Create(SchedulesRec("n", "0 0 30 2 *"), kSchedulesT0).message()), HasSubstr("names no time"));
  v1::ScheduleRecord zoned = SchedulesRec("n", "@daily");
  zoned.set_time_zone("Nowhere/Atlantis");
  EXPECT_THAT(std::string(s.Create(zoned, kSchedulesT0).message()), HasSubstr("time_zone: time zone 'Nowhere/Atlantis'"));
  ASSERT_TRUE(s.Create(SchedulesRec("nightly", "0 2 * * *"), kSchedulesT0).ok());
  EXPECT_EQ(s.Create(SchedulesRec("nightly", "@hourly"), kSchedulesT0).code(), absl::StatusCode::kAlreadyExists);
  for (int i = 1; i < Schedules::kMaxPerUser; ++i) ASSERT_TRUE(s.Create(SchedulesRec(absl::StrCat("s", i), "@daily"), kSchedulesT0).ok());
  absl::Status over = s.Create(SchedulesRec("one-more", "@daily"), kSchedulesT0);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.message()), HasSubstr("user ana has 50 schedules"));
  EXPECT_TRUE(s.Create(SchedulesRec("one-more", "@daily", "bo"), kSchedulesT0).ok()) << "another user's count is their own";
  const v1::ScheduleRecord* n = s.Find("nightly");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->concurrency(), v1::CONCURRENCY_SKIP) << "unset: skip";
  EXPECT_EQ(n->created_unix_ms(), absl::ToUnixMillis(kSchedulesT0));
}

TEST(SchedulesTest, DueOncePerTimeAndADownServersMissedRunsAreCounted) {
  Schedules s;
  ASSERT_TRUE(s.Create(SchedulesRec("m", "* * * * *"), kSchedulesT0).ok());  // every minute
  EXPECT_EQ(s.NextDue(*s.Find("m")), kSchedulesT0 + absl::Seconds(30));
  EXPECT_EQ(s.EarliestDue(), kSchedulesT0 + absl::Seconds(30));
  EXPECT_TRUE(s.TakeDue(kSchedulesT0 + absl::Seconds(29)).empty());
  std::vector<Schedules::Due> due = s.TakeDue(kSchedulesT0 + absl::Seconds(31));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].due, kSchedulesT0 + absl::Seconds(30));
  EXPECT_EQ(due[0].missed, 0);
  EXPECT_TRUE(s.TakeDue(kSchedulesT0 + absl::Seconds(32)).empty()) << "once";
  // Five minutes with no server: the latest run goes, four are missed.
  due = s.TakeDue(kSchedulesT0 + absl::Minutes(5) + absl::Seconds(40));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].due, kSchedulesT0 + absl::Minutes(5) + absl::Seconds(30));
  EXPECT_EQ(due[0].missed, 4);
}

TEST(SchedulesTest, PausedIsNeverDueAndResumedCountsFromThen) {
  Schedules s;
  ASSERT_TRUE(s.Create(SchedulesRec("m", "* * * * *"), kSchedulesT0).ok());
  ASSERT_TRUE(s.SetPaused("m", true, kSchedulesT0).ok());
  EXPECT_EQ(s.NextDue(*s.Find("m")), absl::InfiniteFuture());
  EXPECT_TRUE(s.TakeDue(kSchedulesT0 + absl::Hours(1)).empty());
  ASSERT_TRUE(s.SetPaused("m", false, kSchedulesT0 + absl::Hours(1)).ok());
  std::vector<Schedules::Due> due = s.TakeDue(kSchedulesT0 + absl::Hours(1) + absl::Seconds(31));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].missed, 0) << "what came due while paused is not run";
  EXPECT_EQ(s.SetPaused("x", true, kSchedulesT0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.Delete("x").code(), absl::StatusCode::kNotFound);
}

TEST(SchedulesTest, RecordsAreWrittenReadBackAndTheHistoryIsBounded) {
  Schedules s;
  ASSERT_TRUE(s.Create(SchedulesRec("keep", "@hourly"), kSchedulesT0).ok());
  ASSERT_TRUE(s.Create(SchedulesRec("gone", "@hourly"), kSchedulesT0).ok());
  for (int i = 0; i < 30; ++i) {
    v1::ScheduleRun run;
    run.set_job("keep-" + std::to_string(i));
    ASSERT_TRUE(s.AddRun("keep", run));
  }
  EXPECT_FALSE(s.AddRun("nosuch", v1::ScheduleRun()));
  ASSERT_EQ(s.Find("keep")->runs_size(), Schedules::kMaxRuns);
  EXPECT_EQ(s.Find("keep")->runs(0).job(), "keep-10") << "the oldest leave first";
  ASSERT_TRUE(s.Delete("gone").ok());
  std::map<std::string, std::string> meta = {{"next_job_id_floor", "9"}};
  for (auto& [key, value] : s.TakeWrites()) {
    if (key == "schedule/gone") {
      EXPECT_FALSE(value.has_value()) << "deleted";
    } else {
      ASSERT_TRUE(value.has_value()) << key;
      meta[key] = *value;
    }
  }
  EXPECT_TRUE(s.TakeWrites().empty());
  // A failed write's records are written again as they are now.
  s.Rewrite("schedule/keep");
  s.Rewrite("schedule/gone");
  s.Rewrite("next_job_id_floor");
  std::vector<std::pair<std::string, std::optional<std::string>>> again = s.TakeWrites();
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].first, "schedule/gone");
  EXPECT_FALSE(again[0].second.has_value());
  EXPECT_EQ(again[1].first, "schedule/keep");
  EXPECT_EQ(again[1].second, meta["schedule/keep"]);
  Schedules back;
  back.Recover(meta);
  ASSERT_NE(back.Find("keep"), nullptr);
  EXPECT_EQ(back.Find("gone"), nullptr);
  EXPECT_EQ(back.Find("keep")->runs_size(), Schedules::kMaxRuns);
  EXPECT_EQ(back.NextDue(*back.Find("keep")), s.NextDue(*s.Find("keep")));
  EXPECT_EQ(RunSpec(*back.Find("keep"), kSchedulesT0).name(), "keep-" + std::to_string(absl::ToUnixSeconds(kSchedulesT0)));
  EXPECT_EQ(RunSpec(*back.Find("keep"), kSchedulesT0).user(), "ana");
}

}  // namespace
}  // namespace trainyard::server
