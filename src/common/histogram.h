// Histogram: counts of observations in fixed buckets, as Prometheus exposes
// a histogram (cumulative `le` buckets, a sum and a count). A value type of
// fixed size, so a component can keep one under its own lock and publish a
// copy without allocating.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>

namespace trainyard {

class Histogram {
 public:
  static constexpr int kMaxBuckets = 16;

  Histogram() = default;
  // `bounds`: the buckets' upper bounds, ascending, at most kMaxBuckets
  // (more are dropped); the +Inf bucket is implied.
  Histogram(std::initializer_list<double> bounds) {
    for (double b : bounds) {
      if (buckets_ == kMaxBuckets) break;
      bounds_[buckets_++] = b;
    }
  }

  void Observe(double v) {
    int i = static_cast<int>(std::lower_bound(bounds_.begin(), bounds_.begin() + buckets_, v) - bounds_.begin());
    ++counts_[i];
    sum_ += v;
    ++count_;
  }

  // Number of finite buckets.
  int buckets() const { return buckets_; }
  double bound(int i) const { return bounds_[i]; }
  // Observations <= bound(i) (the `le` bucket's value); i == buckets() is +Inf.
  int64_t cumulative(int i) const {
    int64_t n = 0;
    for (int k = 0; k <= i && k <= buckets_; ++k) n += counts_[k];
    return n;
  }
  double sum() const { return sum_; }
  int64_t count() const { return count_; }
  // Observations in bucket i alone (i == buckets() is +Inf).
  int64_t in_bucket(int i) const { return counts_[i]; }

  // Adds `n` observations to bucket i and `sum` to their sum: a copy of
  // another process's histogram, sent as its buckets. REQUIRES: 0 <= i <=
  // buckets(), n >= 0.
  void AddToBucket(int i, int64_t n) {
    counts_[i] += n;
    count_ += n;
  }
  void AddSum(double sum) { sum_ += sum; }
  // Adds every observation of `other`. REQUIRES: the same bounds.
  void Merge(const Histogram& other) {
    for (int i = 0; i <= buckets_; ++i) counts_[i] += other.counts_[i];
    sum_ += other.sum_;
    count_ += other.count_;
  }

 private:
  std::array<double, kMaxBuckets> bounds_{};
  std::array<int64_t, kMaxBuckets + 1> counts_{};
  int buckets_ = 0;
  double sum_ = 0;
  int64_t count_ = 0;
};

// Bucket bounds in seconds for latencies from 0.5 ms to 10 s.
inline Histogram LatencyHistogram() {
  return Histogram{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace trainyard
