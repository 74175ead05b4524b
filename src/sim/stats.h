// Statistics the simulator reports: distributions of per-job times (mean,
// p50, p99) and time-weighted averages of quantities that change at events
// (GPU allocation ratio, fragmentation).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace trainyard::sim {

struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

// Summarizes `values` (reordered in place). Percentiles are nearest-rank:
// the smallest value with at least p% of the values at or below it. All
// zero when `values` is empty.
Distribution Summarize(std::vector<double>* values);

// The time-weighted mean and the peak of a step function of simulated time:
// Set(t, v) says the quantity is v from time t on. REQUIRES: t does not
// decrease between calls.
class TimeWeighted {
 public:
  // Also keeps each change (t, value) when `keep_history`, for Buckets.
  explicit TimeWeighted(bool keep_history = false) : keep_history_(keep_history) {}
  void Set(int64_t t, double value);
  // Closes the function at `end` (>= the last Set time).
  void Finish(int64_t end);
  // Mean over [first Set, end]; the last value when that span is empty.
  double Mean() const;
  double Peak() const { return peak_; }
  int64_t PeakTime() const { return peak_time_; }
  // The time-weighted mean of each of `n` equal spans of [first Set, end]
  // (fewer when the whole span is shorter than n seconds; empty without
  // history or when nothing was Set). REQUIRES: Finish was called.
  std::vector<double> Buckets(int n) const;
  // The length of one span of Buckets(n), in seconds.
  int64_t BucketSeconds(int n) const;

 private:
  bool keep_history_ = false;
  std::vector<std::pair<int64_t, double>> history_;
  bool started_ = false;
  int64_t start_ = 0;
  int64_t last_t_ = 0;
  double value_ = 0;
  double integral_ = 0;
  int64_t end_ = 0;
  double peak_ = 0;
  int64_t peak_time_ = 0;
};

}  // namespace trainyard::sim
