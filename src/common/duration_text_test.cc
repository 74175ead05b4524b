// Durations read as a person would write them.
#include "common/duration_text.h"

#include "gtest/gtest.h"

namespace trainyard {
namespace {

TEST(DurationTextTest, RoundsToWhatMattersAtEachSize) {
  EXPECT_EQ(DurationText(absl::Microseconds(400)), "0 ms");
  EXPECT_EQ(DurationText(absl::Milliseconds(850)), "850 ms");
  EXPECT_EQ(DurationText(absl::Nanoseconds(5312941000)), "5.3 s");
  EXPECT_EQ(DurationText(absl::Seconds(12)), "12 s");
  EXPECT_EQ(DurationText(absl::Milliseconds(59960)), "1 min");
  EXPECT_EQ(DurationText(absl::Seconds(125)), "2 min 5 s");
  EXPECT_EQ(DurationText(absl::Minutes(200)), "3 h 20 min");
  EXPECT_EQ(DurationText(absl::Hours(50)), "2 d 2 h");
  EXPECT_EQ(DurationText(-absl::Milliseconds(1500)), "-1.5 s");
}

}  // namespace
}  // namespace trainyard
