// TokenBucket: full at first, refilled with time up to its burst, never
// by a clock that steps back.
#include "common/token_bucket.h"

#include <gtest/gtest.h>

namespace trainyard {
namespace {

TEST(TokenBucketTest, StartsFullRefillsWithTimeUpToItsBurst) {
  absl::Time t0 = absl::FromUnixSeconds(1000);
  TokenBucket b;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.Take(t0, 1, 3)) << i;
  EXPECT_FALSE(b.Take(t0, 1, 3));
  EXPECT_DOUBLE_EQ(b.SecondsToNext(1), 1);
  EXPECT_TRUE(b.Take(t0 + absl::Seconds(1), 1, 3));
  EXPECT_DOUBLE_EQ(b.LevelAt(t0 + absl::Seconds(100), 1, 3), 3);
  EXPECT_FALSE(b.Take(t0 - absl::Seconds(50), 1, 3));  // a clock stepped back adds nothing
}

}  // namespace
}  // namespace trainyard
