// Cron schedules: what each field form means, the day-of-month / weekday
// rule, time zones across daylight-saving changes, and the errors a user
// sees for a bad expression.
#include "api/cron.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

absl::Time Utc(int y, int mo, int d, int h, int mi, int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), absl::UTCTimeZone());
}

std::string Next(const std::string& cron, absl::Time after, const std::string& zone = "UTC") {
  absl::StatusOr<CronSchedule> c = CronSchedule::Parse(cron);
  if (!c.ok()) return absl::StrCat("parse error: ", c.status().message());
  absl::StatusOr<absl::TimeZone> z = LoadScheduleZone(zone);
  if (!z.ok()) return absl::StrCat("zone error: ", z.status().message());
  absl::Time t = c->Next(after, *z);
  if (t == absl::InfiniteFuture()) return "never";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %a", t, *z);
}

std::string Error(const std::string& cron) {
  absl::StatusOr<CronSchedule> c = CronSchedule::Parse(cron);
  return c.ok() ? "ok" : std::string(c.status().message());
}

TEST(CronTest, FieldsRangesStepsListsAndNames) {
  const absl::Time t0 = Utc(2026, 12, 5, 6, 10, 30);  // a Saturday
  EXPECT_EQ(Next("0 2 * * *", t0), "2026-12-06 02:00:00 Sun");
  EXPECT_EQ(Next("* * * * *", t0), "2026-12-05 06:11:00 Sat");
  EXPECT_EQ(Next("*/15 * * * *", t0), "2026-12-05 06:15:00 Sat");
  EXPECT_EQ(Next("5/20 * * * *", t0), "2026-12-05 06:25:00 Sat");
  EXPECT_EQ(Next("0 9-17/4 * * *", t0), "2026-12-05 09:00:00 Sat");
  EXPECT_EQ(Next("30 8 * * mon-fri", t0), "2026-12-07 08:30:00 Mon");
  EXPECT_EQ(Next("0 0 1 jan,JUL *", t0), "2027-01-01 00:00:00 Fri");
  EXPECT_EQ(Next("0 12 * * 7", t0), "2026-12-06 12:00:00 Sun") << "7 is Sunday too";
  EXPECT_EQ(Next("0 12 * * 0", t0), "2026-12-06 12:00:00 Sun");
  EXPECT_EQ(Next("*/2 * * * * *", t0), "2026-12-05 06:10:32 Sat") << "six fields: seconds first";
  EXPECT_EQ(Next("@hourly", t0), "2026-12-05 07:00:00 Sat");
  EXPECT_EQ(Next("@daily", t0), "2026-12-06 00:00:00 Sun");
  EXPECT_EQ(Next("@weekly", t0), "2026-12-06 00:00:00 Sun");
  EXPECT_EQ(Next("@monthly", t0), "2027-01-01 00:00:00 Fri");
  EXPECT_EQ(Next("@yearly", t0), "2027-01-01 00:00:00 Fri");
  // Strictly after: a time the schedule names is not its own next.
  EXPECT_EQ(Next("10 6 * * *", Utc(2026, 12, 5, 6, 10)), "2026-12-06 06:10:00 Sun");
}

TEST(CronTest, DayOfMonthAndWeekdayBothRestrictedMeansEither) {
  const absl::Time t0 = Utc(2026, 12, 5, 0, 0);
  // The 13th, or any Friday: Friday the 11th comes first.
  EXPECT_EQ(Next("0 0 13 * fri", t0), "2026-12-11 00:00:00 Fri");
  // Only the day of month restricted: the 31st, skipping months without one.
  EXPECT_EQ(Next("0 0 31 * *", Utc(2027, 1, 31, 1, 0)), "2027-03-31 00:00:00 Wed");
  EXPECT_EQ(Next("0 0 29 2 *", t0), "2028-02-29 00:00:00 Tue");
  EXPECT_EQ(Next("0 0 30 2 *", t0), "never");
  // A field that begins with `*` restricts nothing in that rule (Vixie): only Mondays.
  EXPECT_EQ(Next("0 0 */2 * mon", t0), "2026-12-07 00:00:00 Mon");
  EXPECT_EQ(Next("0 0 */2 * mon", Utc(2026, 12, 7, 1, 0)), "2026-12-14 00:00:00 Mon");
  // An open weekday step ends on Saturday: 1/2 is Monday, Wednesday, Friday.
  EXPECT_EQ(Next("0 0 * * 1/2", Utc(2026, 12, 11, 1, 0)), "2026-12-14 00:00:00 Mon");
}

TEST(CronTest, TimeZonesAndDaylightSavingChanges) {
  // 02:00 in Berlin is 01:00 UTC in winter.
  EXPECT_EQ(Next("0 2 * * *", Utc(2026, 12, 5, 6, 0), "Europe/Berlin"), "2026-12-06 02:00:00 Sun");
  absl::StatusOr<CronSchedule> c = CronSchedule::Parse("0 2 * * *");
  ASSERT_TRUE(c.ok());
  absl::TimeZone berlin = *LoadScheduleZone("Europe/Berlin");
  EXPECT_EQ(c->Next(Utc(2026, 12, 5, 6, 0), berlin), Utc(2026, 12, 6, 1, 0));
  // New York skips 02:00-03:00 on 2027-03-14: the 02:30 run is at the change.
  absl::TimeZone ny = *LoadScheduleZone("America/New_York");
  absl::StatusOr<CronSchedule> half = CronSchedule::Parse("30 2 * * *");
  ASSERT_TRUE(half.ok());
  absl::Time skipped = half->Next(Utc(2027, 3, 13, 12, 0), ny);
  EXPECT_EQ(absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", skipped, ny), "2027-03-14 03:00:00 EDT");
  EXPECT_EQ(half->Next(skipped, ny), absl::FromCivil(absl::CivilSecond(2027, 3, 15, 2, 30, 0), ny));
  // It repeats 01:00-02:00 on 2027-11-07: the 01:30 run is once.
  absl::StatusOr<CronSchedule> repeated = CronSchedule::Parse("30 1 * * *");
  ASSERT_TRUE(repeated.ok());
  absl::Time first = repeated->Next(Utc(2027, 11, 6, 12, 0), ny);
  EXPECT_EQ(absl::FormatTime("%Y-%m-%d %H:%M %Z", first, ny), "2027-11-07 01:30 EDT");
  EXPECT_EQ(absl::FormatTime("%Y-%m-%d %H:%M %Z", repeated->Next(first, ny), ny), "2027-11-08 01:30 EST");
}

TEST(CronTest, ErrorsNameTheFieldAndTheReason) {
  EXPECT_EQ(Error("0 25 * * *"), "field 2 (hour): 25 is outside 0-23");
  EXPECT_EQ(Error("61 * * * * *"), "field 1 (second): 61 is outside 0-59");
  EXPECT_THAT(Error("0 0 * * *  *  *"), HasSubstr("has 7 fields; a schedule has 5"));
  EXPECT_THAT(Error("0 0 * foo *"), HasSubstr("field 4 (month): 'foo' is not a number or a name (1-12)"));
  EXPECT_THAT(Error("0 0 * * 8"), HasSubstr("field 5 (day of week): 8 is outside 0-7"));
  EXPECT_THAT(Error("*/0 * * * *"), HasSubstr("field 1 (minute): the step in '*/0'"));
  EXPECT_THAT(Error("0 10-5 * * *"), HasSubstr("field 2 (hour): the range '10-5' runs backwards"));
  EXPECT_THAT(Error("0 0 L * *"), HasSubstr("field 3 (day of month): 'L' is not a number (1-31)"));
  EXPECT_THAT(Error("0 0 1,,2 * *"), HasSubstr("an empty item"));
  EXPECT_THAT(Error("@sometimes"), HasSubstr("'@sometimes' is not one of @yearly"));
  EXPECT_THAT(Error("@reboot"), HasSubstr("@reboot is not a schedule here"));
  EXPECT_THAT(Error(""), HasSubstr("has 0 fields"));
  EXPECT_THAT(std::string(LoadScheduleZone("Mars/Olympus").status().message()),
              HasSubstr("time zone 'Mars/Olympus' is not known here"));
  EXPECT_TRUE(LoadScheduleZone("").ok());
  // A name, never a path: the library would open it (and keep it).
  for (const char* bad : {"/etc/passwd", "Europe/../../etc/passwd", "file:/dev/zero", "libc:localtime"}) {
    EXPECT_THAT(std::string(LoadScheduleZone(bad).status().message()), HasSubstr("is not an IANA name")) << bad;
  }
  EXPECT_THAT(std::string(LoadScheduleZone(std::string(100, 'A')).status().message()), HasSubstr("at most 64"));
  EXPECT_THAT(Error(std::string(300, '*')), HasSubstr("longer than 256"));
}

}  // namespace
}  // namespace trainyard::api
