// Tests of the report statistics: nearest-rank percentiles and
// time-weighted means, on values worked out by hand.
#include "sim/stats.h"

#include "gtest/gtest.h"

namespace trainyard::sim {
namespace {

TEST(SummarizeTest, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  Distribution d = Summarize(&v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.p50, 50);
  EXPECT_DOUBLE_EQ(d.p99, 99);
  EXPECT_DOUBLE_EQ(d.max, 100);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  std::vector<double> v;
  Distribution d = Summarize(&v);
  EXPECT_EQ(d.count, 0);
  EXPECT_DOUBLE_EQ(d.p99, 0);
}

TEST(TimeWeightedTest, MeanAndPeak) {
  TimeWeighted w;
  w.Set(0, 0.5);   // 0.5 for 10 s
  w.Set(10, 1.0);  // 1.0 for 10 s
  w.Set(20, 0.0);  // 0 for 20 s
  w.Finish(40);
  EXPECT_DOUBLE_EQ(w.Mean(), (5.0 + 10.0) / 40.0);
  EXPECT_DOUBLE_EQ(w.Peak(), 1.0);
  EXPECT_EQ(w.PeakTime(), 10);
}

TEST(TimeWeightedTest, BucketsAreSpanMeans) {
  TimeWeighted w(/*keep_history=*/true);
  w.Set(0, 0.5);   // 0..10
  w.Set(10, 1.0);  // 10..20
  w.Set(20, 0.0);  // 20..40
  w.Finish(40);
  EXPECT_EQ(w.BucketSeconds(4), 10);
  EXPECT_EQ(w.Buckets(4), (std::vector<double>{0.5, 1.0, 0.0, 0.0}));
  EXPECT_EQ(w.BucketSeconds(2), 20);
  EXPECT_EQ(w.Buckets(2), (std::vector<double>{0.75, 0.0}));
  EXPECT_EQ(w.Buckets(3).size(), 3u);  // spans of 14 s: 0..14, 14..28, 28..40
  EXPECT_DOUBLE_EQ(w.Buckets(3)[0], (10 * 0.5 + 4 * 1.0) / 14);
}

}  // namespace
}  // namespace trainyard::sim
