// The cluster over time, for the dashboard's charts: a ring of samples the
// server takes from the published views every historyIntervalMs (10 s) and
// keeps for historyRetentionMinutes (3 h), then overwrites. A sample is a
// few numbers for the cluster (GPUs allocated, free, excluded; nodes ready;
// jobs running and queued; jobs placed since the last sample and how long
// they had waited) and a few per queue (GPUs used, jobs running and
// queued, the longest wait of a queued job). Memory is bounded by the ring's
// length times the queues: about 100 bytes plus 60 per queue a sample, so
// 3 h at 10 s with 4 queues is about 0.4 MB. Sampling reads the ViewStore
// (never the server's lock); the ring is not kept across restarts.
// GET /api/v1/history serves it (docs/api.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/histogram.h"
#include "server/http/http_server.h"
#include "server/view_store.h"

namespace trainyard::server::http {

struct HistoryQueue {
  std::string name;
  double gpus_used = 0;  // a GPU share as its fraction
  int32_t running_jobs = 0;
  int32_t pending_jobs = 0;
  // The longest any of its queued jobs has waited since its submission (s).
  double longest_wait_s = 0;
};

struct HistorySample {
  int64_t unix_ms = 0;
  int32_t gpus_total = 0;
  double gpus_allocated = 0;  // a GPU share as its fraction
  double gpus_free = 0;       // the free part of split GPUs included
  int32_t gpus_excluded = 0;
  int32_t nodes = 0;
  int32_t nodes_ready = 0;
  int64_t jobs_running = 0;  // RUNNING
  int64_t jobs_queued = 0;   // QUEUED
  // Jobs placed since the previous sample, and the mean time they had waited
  // in the queue (s; from the server's pending-time histogram); -1 when
  // none was placed.
  int64_t jobs_placed = 0;
  double mean_wait_s = -1;
  std::vector<HistoryQueue> queues;
};

class History {
 public:
  // Keeps retention / interval samples (at least 1).
  History(absl::Duration interval, absl::Duration retention);

  // Appends a sample of `views` taken at `now`, overwriting the oldest when
  // the ring is full.
  void Record(const ViewStore& views, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The samples taken after `after_unix_ms`, oldest first.
  std::vector<HistorySample> Since(int64_t after_unix_ms) const ABSL_LOCKS_EXCLUDED(mu_);

  absl::Duration interval() const { return interval_; }
  size_t capacity() const { return capacity_; }

 private:
  const absl::Duration interval_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::vector<HistorySample> ring_ ABSL_GUARDED_BY(mu_);  // grows to capacity_, then wraps
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;                  // where the next sample goes once full
  // The pending-time histogram as the last sample saw it (for its deltas).
  int64_t last_placed_ ABSL_GUARDED_BY(mu_) = -1;
  double last_wait_sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Calls history->Record(views) every interval on a thread of its own, the
// first at once, until destroyed. REQUIRES: both outlive it.
class HistorySampler {
 public:
  HistorySampler(History* history, const ViewStore* views);
  ~HistorySampler();

 private:
  History* const history_;
  const ViewStore* const views_;
  absl::Notification stop_;
  std::thread thread_;
};

// GET /api/v1/history[?since=UNIX_MS]: {"interval_ms", "retention_ms",
// "samples": [...]} (the samples after `since`, oldest first). With no
// history (historyIntervalMs 0) a 404 that says so. REQUIRES: before
// server.Serve(); history (when not null) outlives server.
void AddHistoryRoute(HttpServer& server, const History* history);

}  // namespace trainyard::server::http
