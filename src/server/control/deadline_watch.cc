// Jobs' time limits (deadline_watch.h).
#include "server/control/deadline_watch.h"

#include "absl/strings/str_cat.h"
#include "api/states.h"
#include "api/time_limits.h"

namespace trainyard::server {

void DeadlineWatch::Watch(const v1::JobRecord& rec) {
  int64_t at = api::DeadlineMs(rec);
  if (at > 0 && !api::IsTerminal(rec.state())) deadlines_.emplace(absl::FromUnixMillis(at), rec.name());
}

void DeadlineWatch::Unwatch(const v1::JobRecord& rec) {
  int64_t at = api::DeadlineMs(rec);
  if (at > 0) deadlines_.erase({absl::FromUnixMillis(at), rec.name()});
}

std::vector<std::string> DeadlineWatch::TakeDue(absl::Time now) {
  std::vector<std::string> due;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    due.push_back(deadlines_.begin()->second);
    deadlines_.erase(deadlines_.begin());
  }
  return due;
}

std::string DeadlineWatch::Why(const v1::JobRecord& rec) {
  std::string started =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(rec.start_time_ms()), absl::UTCTimeZone());
  return absl::StrCat("ran past its activeDeadline of ", api::TimeLimitText(rec.spec().active_deadline_ms()),
                      " (started at ", started, ")");
}

}  // namespace trainyard::server
