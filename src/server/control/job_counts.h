// JobCounts: the unfinished jobs of each queue and each user, kept as their
// states change (Count), and the per-user limits on submissions judged from
// them: maxPendingJobsPerUser (jobs waiting to start, those submitted and not
// yet durable included) and maxSubmissionsPerSecondPerUser (a token bucket
// per user). The queue view is published every few milliseconds while jobs
// move, and walking every job kept (finished ones included) each time would
// grow with the server's history. Part of the control state:
// single-threaded, no I/O.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/token_bucket.h"

namespace trainyard::server {

struct JobRt;  // job_rt.h

class JobCounts {
 public:
  // 0 or less: no limit.
  JobCounts(int max_pending_per_user, int max_submissions_per_second_per_user)
      : max_pending_(max_pending_per_user), rate_(max_submissions_per_second_per_user) {}

  // Moves the job's count (JobRt::counted) to what its state now says:
  // QUEUED is pending, a live job running, an ended one not counted.
  void Count(JobRt& job);

  // OK, or ResourceExhausted naming the limit `user` reached. `jobs`: how
  // many submissions this counts against the user's rate (an array's first
  // element counts all its elements, the others none); taken only when OK.
  absl::Status CheckUser(const std::string& user, absl::Time now, int jobs = 1);
  // A submission prepared and not yet durable counts as its user's pending
  // job until the store answers it (Answered; then Count counts it by its
  // state, if it was taken).
  void Prepared(const std::string& user) { ++users_[user].pending; }
  void Answered(const std::string& user) { --users_[user].pending; }

  struct Queue {
    int running = 0;
    int pending = 0;
  };
  // The counts of queue `name` (null: none of its jobs was ever counted).
  const Queue* queue(const std::string& name) const;
  // QUEUED jobs in every queue.
  int pending() const { return pending_; }
  // The user's pending jobs, prepared ones included.
  int user_pending(const std::string& user) const;

 private:
  struct User {
    int pending = 0;
    TokenBucket submissions;
  };
  const int max_pending_;
  const int rate_;
  std::map<std::string, Queue> queues_;
  std::map<std::string, User> users_;
  int pending_ = 0;
};

}  // namespace trainyard::server
