// Distributions and time-weighted averages; see stats.h.
#include "sim/stats.h"

#include <algorithm>
#include <cmath>

namespace trainyard::sim {

namespace {

// Nearest-rank percentile of sorted, non-empty `v`.
double Percentile(const std::vector<double>& v, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  if (rank < 1) rank = 1;
  return v[std::min(rank, v.size()) - 1];
}

}  // namespace

Distribution Summarize(std::vector<double>* values) {
  Distribution d;
  if (values->empty()) return d;
  std::sort(values->begin(), values->end());
  double sum = 0;
  for (double v : *values) sum += v;
  d.count = static_cast<int64_t>(values->size());
  d.mean = sum / static_cast<double>(values->size());
  d.p50 = Percentile(*values, 50);
  d.p99 = Percentile(*values, 99);
  d.max = values->back();
  return d;
}

void TimeWeighted::Set(int64_t t, double value) {
  if (!started_) {
    started_ = true;
    start_ = t;
  } else {
    integral_ += value_ * static_cast<double>(t - last_t_);
  }
  last_t_ = t;
  end_ = t;
  value_ = value;
  if (value > peak_) {
    peak_ = value;
    peak_time_ = t;
  }
}

void TimeWeighted::Finish(int64_t end) {
  if (!started_) return;
  integral_ += value_ * static_cast<double>(end - last_t_);
  last_t_ = end;
  end_ = end;
}

double TimeWeighted::Mean() const {
  if (end_ <= start_) return value_;
  return integral_ / static_cast<double>(end_ - start_);
}

}  // namespace trainyard::sim
