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
  if (keep_history_ && (history_.empty() || history_.back().second != value)) {
    if (!history_.empty() && history_.back().first == t) history_.pop_back();
    if (history_.empty() || history_.back().second != value) history_.push_back({t, value});
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

int64_t TimeWeighted::BucketSeconds(int n) const {
  int64_t span = end_ - start_;
  if (n <= 0 || span <= 0) return 0;
  return std::max<int64_t>(1, (span + n - 1) / n);
}

std::vector<double> TimeWeighted::Buckets(int n) const {
  std::vector<double> out;
  int64_t width = BucketSeconds(n);
  if (history_.empty() || width == 0) return out;
  size_t k = 0;  // history_[k] is the value in force at bucket start
  for (int64_t from = start_; from < end_; from += width) {
    int64_t to = std::min(end_, from + width);
    double area = 0;
    while (k + 1 < history_.size() && history_[k + 1].first <= from) ++k;
    for (size_t i = k; i < history_.size() && history_[i].first < to; ++i) {
      int64_t a = std::max(from, history_[i].first);
      int64_t b = i + 1 < history_.size() ? std::min(to, history_[i + 1].first) : to;
      area += history_[i].second * static_cast<double>(b - a);
    }
    out.push_back(area / static_cast<double>(to - from));
  }
  return out;
}

double TimeWeighted::Mean() const {
  if (end_ <= start_) return value_;
  return integral_ / static_cast<double>(end_ - start_);
}

}  // namespace trainyard::sim
