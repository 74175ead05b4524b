// ControlState: jobs' time limits (activeDeadline). A started job with a
// limit is kept in deadlines_, ordered by when its limit runs out; each
// round ends those past it as DEADLINE_EXCEEDED, their tasks stopped as a
// preemption stops them (StopWithGrace). Time is the round's `now`, not a
// timer thread. The deadline is the recorded start plus the limit
// (api::DeadlineMs), so a restarted server watches it again from the store.
#include "absl/strings/str_cat.h"
#include "api/states.h"
#include "api/time_limits.h"
#include "server/control/control_state.h"
#include "server/control/control_state_internal.h"

namespace trainyard::server {

void ControlState::WatchDeadline(const JobRt& job) {
  int64_t at = api::DeadlineMs(job.rec);
  if (at > 0 && !api::IsTerminal(job.rec.state())) deadlines_.emplace(absl::FromUnixMillis(at), job.rec.name());
}

void ControlState::UnwatchDeadline(const JobRt& job) {
  int64_t at = api::DeadlineMs(job.rec);
  if (at > 0) deadlines_.erase({absl::FromUnixMillis(at), job.rec.name()});
}

void ControlState::CheckDeadlines(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    auto [at, name] = *deadlines_.begin();
    deadlines_.erase(deadlines_.begin());
    JobRt* job = FindJob(name);
    if (!job || job->ending || api::IsTerminal(job->rec.state())) continue;
    const v1::JobRecord& rec = job->rec;
    std::string started = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(rec.start_time_ms()),
                                           absl::UTCTimeZone());
    EndJob(*job, v1::JOB_DEADLINE_EXCEEDED,
           absl::StrCat("ran past its activeDeadline of ", api::TimeLimitText(rec.spec().active_deadline_ms()),
                        " (started at ", started, ")"),
           now);
  }
}

}  // namespace trainyard::server
