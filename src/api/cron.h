// Cron schedules for scheduled jobs (`trainyard schedule create --cron`):
// five fields — minute, hour, day of month, month, day of week — or six
// with seconds first; in each `*`, a number, a range `a-b`, a step `*/n` or
// `a-b/n` or `a/n`, and lists of those `a,b-c`; months and weekdays also by
// name (jan..dec, sun..sat, any case; 0 and 7 are Sunday); or one of
// @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly. As
// in Vixie cron, when both the day of month and the day of week are
// restricted a day matching either counts. Times are civil times in a time
// zone: a time that a daylight-saving change skips runs at the change, one
// it repeats runs once (the first).
#pragma once

#include <bitset>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainyard::api {

class CronSchedule {
 public:
  // InvalidArgument naming the field and the reason:
  // "field 2 (hour): 25 is outside 0-23".
  static absl::StatusOr<CronSchedule> Parse(absl::string_view text);

  // The first time strictly after `after` that the schedule names, in
  // `zone`; absl::InfiniteFuture() when there is none within five years
  // (30 February).
  absl::Time Next(absl::Time after, absl::TimeZone zone) const;

  // Whether the schedule names seconds (six fields).
  bool has_seconds() const { return has_seconds_; }

 private:
  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;      // 1..31
  std::bitset<13> months_;    // 1..12
  std::bitset<7> weekdays_;   // 0 = Sunday
  bool days_any_ = true;      // the day-of-month field was `*`
  bool weekdays_any_ = true;  // the day-of-week field was `*`
  bool has_seconds_ = false;
};

// The IANA time zone `name` ("" = UTC); InvalidArgument naming it when the
// machine's time zone data has no such zone.
absl::StatusOr<absl::TimeZone> LoadScheduleZone(const std::string& name);

}  // namespace trainyard::api
