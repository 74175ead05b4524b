// Histogram: what a scrape of its buckets shows.
#include "common/histogram.h"

#include "gtest/gtest.h"

namespace trainyard {
namespace {

TEST(HistogramTest, BucketsAreCumulativeAndAValueOnABoundCountsInIt) {
  Histogram h{1, 2, 5};
  h.Observe(0.5);
  h.Observe(1);  // le="1" holds a value equal to its bound
  h.Observe(3);
  h.Observe(7);
  EXPECT_EQ(h.buckets(), 3);
  EXPECT_EQ(h.cumulative(0), 2);
  EXPECT_EQ(h.cumulative(1), 2);
  EXPECT_EQ(h.cumulative(2), 3);
  EXPECT_EQ(h.cumulative(3), 4);  // +Inf
  EXPECT_EQ(h.count(), 4);
  EXPECT_DOUBLE_EQ(h.sum(), 11.5);
}

TEST(HistogramTest, BoundsBeyondTheMostAreDropped) {
  Histogram h{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  EXPECT_EQ(h.buckets(), Histogram::kMaxBuckets);
  h.Observe(17);
  EXPECT_EQ(h.cumulative(Histogram::kMaxBuckets - 1), 0);
  EXPECT_EQ(h.cumulative(Histogram::kMaxBuckets), 1);
}

TEST(HistogramTest, ACopySentAsBucketsMergesIntoAnother) {
  Histogram h{1, 2};
  h.Observe(0.5);
  h.Observe(3);
  Histogram copy{1, 2};
  for (int i = 0; i <= h.buckets(); ++i) copy.AddToBucket(i, h.in_bucket(i));
  copy.AddSum(h.sum());
  EXPECT_EQ(copy.count(), 2);
  EXPECT_EQ(copy.cumulative(1), 1);
  Histogram total{1, 2};
  total.Observe(1.5);
  total.Merge(copy);
  EXPECT_EQ(total.cumulative(0), 1);
  EXPECT_EQ(total.cumulative(1), 2);
  EXPECT_EQ(total.count(), 3);
  EXPECT_DOUBLE_EQ(total.sum(), 5);
}

}  // namespace
}  // namespace trainyard
