// The unfinished jobs of each queue and user, and the per-user limits
// (job_counts.h).
#include "server/control/job_counts.h"

#include "absl/strings/str_cat.h"
#include "api/states.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

void JobCounts::Count(JobRt& job) {
  using Counted = JobRt::Counted;
  v1::JobState state = job.rec.state();
  Counted now = api::IsTerminal(state) ? Counted::kNone
                : state == v1::JOB_QUEUED ? Counted::kPending
                                          : Counted::kRunning;
  if (now == job.counted) return;
  Queue& q = queues_[job.rec.spec().queue()];
  int& user_pending = users_[job.rec.spec().user()].pending;
  if (job.counted == Counted::kPending) {
    --q.pending;
    --user_pending;
    --pending_;
  }
  if (job.counted == Counted::kRunning) --q.running;
  if (now == Counted::kPending) {
    ++q.pending;
    ++user_pending;
    ++pending_;
  }
  if (now == Counted::kRunning) ++q.running;
  job.counted = now;
}

absl::Status JobCounts::CheckUser(const std::string& user, absl::Time now, int jobs) {
  User& u = users_[user];
  if (max_pending_ > 0 && u.pending >= max_pending_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "user ", user, " has ", u.pending, " jobs waiting to start, the most this server takes per user "
        "(maxPendingJobsPerUser ", max_pending_, "): wait for some to start, or kill some"));
  }
  if (rate_ <= 0 || jobs <= 0) return absl::OkStatus();
  // `rate_` a second, a burst of up to one second's worth. An array takes
  // one token per element, all or none.
  if (jobs > rate_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "user ", user, ": an array of ", jobs, " elements is more than the ", rate_,
        " jobs a second this server takes per user (maxSubmissionsPerSecondPerUser): submit it as smaller arrays"));
  }
  u.submissions.Refill(now, rate_, rate_);
  if (u.submissions.tokens < jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "user ", user, " submits faster than the ", rate_, " jobs a second this server takes per user "
        "(maxSubmissionsPerSecondPerUser): try again in a moment"));
  }
  u.submissions.tokens -= jobs;
  return absl::OkStatus();
}

const JobCounts::Queue* JobCounts::queue(const std::string& name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

int JobCounts::user_pending(const std::string& user) const {
  auto it = users_.find(user);
  return it == users_.end() ? 0 : it->second.pending;
}

}  // namespace trainyard::server
