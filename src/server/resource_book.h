// ResourceBook: the running tasks' resource samples (v1::TaskResourceReport
// from their agents) for `trainyard top`, the job page's charts and
// /metrics: each task's last kMaxSamples samples of the last `keep_for`
// (15 minutes: 90 at the default 10 s), in memory only (a restarted server
// starts empty: they are a view, not state). Bounded whatever the agents
// send: at most kMaxSamples per task (a sample that comes within half an
// interval of the last takes its place), at most `max_tasks` tasks (when
// full, tasks sampled no more within Fresh() make room; past that a task is
// not kept, and counted), figures clamped (a stranger's numbers never
// overflow a sum). Samples are stamped by the book on arrival, never going
// back, so a reader that asks for those since the newest it saw misses
// none. Thread-safe: agents' streams record, readers read, under the
// book's own lock.
#pragma once

#include <algorithm>
#include <cstdint>
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
  static constexpr size_t kMaxSamples = 90;
  // Ceilings of one sample's figures (a task's use is far below them).
  static constexpr int32_t kMaxMilli = 1 << 24;          // 16,777 cores or GPUs
  static constexpr int64_t kMaxBytes = int64_t{1} << 44;  // 16 TiB

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
    return FreshLocked();
  }

  // One task's sample as kept (32 bytes). gpu_busy_milli -1: not known.
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

  // Keeps the samples of one report of `node`'s agent, each of task
  // (job_id, role, index), stamped `now` (or the last stamp, if later).
  void Record(const std::string& node, const std::vector<const v1::TaskResources*>& tasks, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Record(const std::string& node, const v1::TaskResources& task, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_) {
    Record(node, std::vector<const v1::TaskResources*>{&task}, now);
  }
  // Drops what is older than keep_for, and tasks left without samples;
  // Record does it once a minute, the server's loop too.
  void Prune(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // The job's tasks by (role, index): their samples at or after `since`,
  // and always the newest (only that with `newest_only`).
  std::map<std::pair<std::string, int>, TaskSeries> Job(uint64_t job_id, absl::Time since,
                                                        bool newest_only = false) const ABSL_LOCKS_EXCLUDED(mu_);

  // A job's tasks summed, each by its newest sample within `fresh` of now.
  struct JobNow {
    uint64_t job_id = 0;
    std::string job;
    int tasks = 0;
    int64_t cpu_milli = 0;
    int64_t memory_bytes = 0;
    int64_t gpu_busy_milli = 0;  // of the GPUs whose load is known
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
    return limit_bytes > 0 && static_cast<__int128>(memory_bytes) * 10 >= static_cast<__int128>(limit_bytes) * 9;
  }

 private:
  struct JobSeries {
    std::string name;
    std::map<std::pair<std::string, int>, TaskSeries> tasks;
  };
  void PruneLocked(absl::Time now, absl::Duration older_than) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordLocked(const std::string& node, const v1::TaskResources& task, int64_t stamp_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration FreshLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::max(absl::Seconds(30), 3 * options_.interval);
  }

  mutable absl::Mutex mu_;
  Options options_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, JobSeries> jobs_ ABSL_GUARDED_BY(mu_);
  int64_t tasks_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_stamp_ms_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_prune_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_room_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // when full: the next making of room
};

// The answer to JobResources for `job`'s view and its tasks' series (from
// Job): every task of the view, those not sampled with no samples; the
// job's sums per `interval_ms` (each task's newest sample at or before the
// interval's end, if no older than three intervals); with `newest_only`,
// the last sums alone.
v1::JobResourcesResponse BuildJobResources(const v1::JobView& job,
                                           const std::map<std::pair<std::string, int>, ResourceBook::TaskSeries>& series,
                                           int interval_ms, bool newest_only = false);

}  // namespace trainyard::server
