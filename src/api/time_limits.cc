// Jobs' time limits (see time_limits.h).
#include "api/time_limits.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/states.h"

namespace trainyard::api {

absl::StatusOr<int64_t> ParseTimeLimit(std::string_view text) {
  std::string t(absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
  absl::Duration d;
  // absl reads "0" without a unit and "inf": neither is a limit.
  if (!absl::ParseDuration(t, &d) || d == absl::InfiniteDuration() || t == "0") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", t, "' is not a duration like 2h, 30m, 90s or 1h30m"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("'", t, "' is not a positive duration"));
  }
  // Below a millisecond it would be stored as no limit at all.
  if (d < absl::Milliseconds(1)) return absl::InvalidArgumentError(absl::StrCat("'", t, "' is below 1ms"));
  return absl::ToInt64Milliseconds(d);
}

std::string TimeLimitText(int64_t ms) { return absl::FormatDuration(absl::Milliseconds(ms)); }

int64_t DeadlineMs(const v1::JobRecord& job) {
  int64_t limit = job.spec().active_deadline_ms();
  if (limit <= 0 || job.start_time_ms() <= 0) return 0;
  return job.start_time_ms() + limit;
}

std::optional<int64_t> TimeLeftMs(const v1::JobView& job, int64_t now_ms) {
  if (job.deadline_unix_ms() <= 0 || IsTerminal(job.state())) return std::nullopt;
  return std::max<int64_t>(0, job.deadline_unix_ms() - now_ms);
}

std::string TimeLimitLine(const v1::JobView& job, int64_t now_ms) {
  if (job.active_deadline_ms() <= 0) return "none";
  std::string limit = TimeLimitText(job.active_deadline_ms());
  if (job.state() == v1::JOB_DEADLINE_EXCEEDED) return absl::StrCat(limit, " (exceeded)");
  if (IsTerminal(job.state())) return limit;
  std::optional<int64_t> left = TimeLeftMs(job, now_ms);
  if (!left) return absl::StrCat(limit, " (counted from when the job starts running)");
  // Whole seconds: a line read by a person, not a timer.
  int64_t whole = *left / 1000 * 1000;
  return absl::StrCat(limit, " (", whole > 0 ? TimeLimitText(whole) : "under 1s", " left)");
}

}  // namespace trainyard::api
