// JobMasterMetrics: what the job masters report of themselves
// (ReportJobMasterSummary, every ~2 s and when each stops), summed for the
// server's /metrics: masters reporting, workers by state, connections, and
// one barrier latency histogram. There is no per-job label on purpose:
// every job would be a new set of series (and, scraped from each master's
// own port, a new target) that lives only as long as the job, which
// Prometheus keeps paying for long after (docs/metrics.md).
//
// The histogram stays a counter across masters: a master that stops (its
// last summary `final`, or silent for kForget) or restarts (its count went
// down) leaves its observations in a retired histogram that the sum keeps.
// One silent for kStale no longer counts in the gauges but keeps its place,
// so a summary it sends later replaces its own rather than adding to it.
// Its own mutex: a report never takes the scheduling lock.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/histogram.h"
#include "proto/service.pb.h"

namespace trainyard::server {

// The sums one scrape shows.
struct JobMasterTotals {
  int64_t reporting = 0;                // masters heard from within kStale, not stopped
  std::array<int64_t, 5> workers{};     // by v1::WorkerState
  int64_t connections = 0;
  Histogram barrier_seconds = LatencyHistogram();  // every master's, stopped ones too
};

class JobMasterMetrics {
 public:
  // A master not heard from for this long is not counted in the gauges...
  static constexpr absl::Duration kStale = absl::Seconds(10);
  // ...and for this long is taken as stopped (its barriers retired).
  static constexpr absl::Duration kForget = absl::Minutes(10);
  // The most masters kept at once (each is a few hundred bytes).
  static constexpr size_t kMaxMasters = 100000;

  // Takes one summary, received at `now`, of a master the caller has
  // checked speaks for the job. InvalidArgument naming the field for bad
  // figures; ResourceExhausted above kMaxMasters.
  absl::Status Report(const v1::JobMasterSummary& summary, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The sums at `now` (masters silent for kForget are retired first).
  JobMasterTotals Totals(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Master {
    std::array<int32_t, 5> workers{};
    int32_t connections = 0;
    Histogram barrier_seconds = LatencyHistogram();
    absl::Time heard;
  };
  void RetireSilent(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // By job and the master's address (a replaced master may still report).
  std::map<std::pair<std::string, std::string>, Master> masters_ ABSL_GUARDED_BY(mu_);
  Histogram retired_ ABSL_GUARDED_BY(mu_) = LatencyHistogram();
};

// Checks a summary's figures: InvalidArgument naming the field.
absl::Status ValidateJobMasterSummary(const v1::JobMasterSummary& summary);

}  // namespace trainyard::server
