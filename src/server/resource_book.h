// ResourceBook: the running tasks' resource samples (v1::TaskResourceReport
// from their agents) for `trainyard top`, the job page's charts and
// /metrics: each task's samples of the last `keep_for` (15 minutes), in
// memory only (a restarted server starts empty: they are a view, not
// state). Bounded: at most `max_tasks` tasks have samples (a task past it
// is not kept, and counted), and a task sampled no more leaves once its
// newest sample is older than keep_for. Thread-safe: agents' streams record,
// readers read, under the book's own lock.
#pragma once

#include <cstdint>
#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::server {

class ResourceBook {
 public:
  struct Options {
    absl::Duration keep_for = absl::Minutes(15);
    int max_tasks = 20000;
    absl::Duration interval = absl::Seconds(10);  // how often agents sample
  };
  ResourceBook() : ResourceBook(Options{}) {}
  explicit ResourceBook(Options options) : options_(options) {}
  // The server's taskSampleMaxTasks and taskSampleIntervalMs; before any
  // Record.
  void Configure(int max_tasks, absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    options_.max_tasks = max_tasks;
    options_.interval = interval;
  }
  // How old a task's newest sample may be to count as its use now: three
  // sample intervals, at least 30 s.
  absl::Duration Fresh() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return std::max(absl::Seconds(30), 3 * options_.interval);
  }

  // One task's sample as kept (32 bytes).
  struct Sample {
    int64_t time_unix_ms = 0;
    int64_t memory_bytes = 0;
    int64_t gpu_memory_bytes = 0;
    int32_t cpu_milli = 0;
    int32_t gpu_busy_milli = 0;
  };
  struct TaskSeries {
    std::string node;
    int attempt = 0;
    int64_t memory_limit_bytes = 0;
    std::string source;
    std::deque<Sample> samples;  // oldest first
  };

  // Keeps the samples `node`'s agent sent of task (job_id, role, index).
  void Record(const std::string& node, const v1::TaskResources& task, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops what is older than keep_for, and tasks left without samples;
  // Record does it once a minute.
  void Prune(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // The job's tasks by (role, index), with their samples at or after `since`.
  std::map<std::pair<std::string, int>, TaskSeries> Job(uint64_t job_id, absl::Time since) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // A job's tasks summed, each by its newest sample within `fresh` of now.
  struct JobNow {
    uint64_t job_id = 0;
    std::string job;
    int tasks = 0;
    int64_t cpu_milli = 0;
    int64_t memory_bytes = 0;
    int64_t gpu_busy_milli = 0;
    int64_t gpu_memory_bytes = 0;
    int near_memory_limit = 0;  // tasks at 90 % of their memory limit or more
  };
  std::vector<JobNow> Now(absl::Time now, absl::Duration fresh) const ABSL_LOCKS_EXCLUDED(mu_);

  struct Counts {
    int64_t tasks = 0;
    int64_t samples = 0;
    int64_t refused = 0;  // samples of tasks past max_tasks, since start
  };
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  // At 90 % of the limit or more (a limit of 0: never).
  static bool NearLimit(int64_t memory_bytes, int64_t limit_bytes) {
    return limit_bytes > 0 && memory_bytes * 10 >= limit_bytes * 9;
  }

 private:
  struct JobSeries {
    std::string name;
    std::map<std::pair<std::string, int>, TaskSeries> tasks;
  };
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Options options_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, JobSeries> jobs_ ABSL_GUARDED_BY(mu_);
  int64_t tasks_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_prune_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The answer to JobResources for `job`'s view and its tasks' series (from
// Job): every task of the view, those not sampled with no samples; the
// job's sums per `interval_ms` (each task's newest sample in it).
v1::JobResourcesResponse BuildJobResources(const v1::JobView& job,
                                           const std::map<std::pair<std::string, int>, ResourceBook::TaskSeries>& series,
                                           int interval_ms);

}  // namespace trainyard::server
