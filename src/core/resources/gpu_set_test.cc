// Tests for GpuSet: construction, parsing with clear errors, set operations
// and printing.
#include "core/resources/gpu_set.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GpuSetTest, FirstNCoversZeroToSixtyFour) {
  EXPECT_TRUE(GpuSet::FirstN(0).Empty());
  EXPECT_EQ(GpuSet::FirstN(8).bits(), 0xffu);
  EXPECT_EQ(GpuSet::FirstN(64).Count(), 64);
  EXPECT_EQ(GpuSet::FirstN(64).bits(), ~uint64_t{0});
}

TEST(GpuSetTest, CountContainsLowest) {
  GpuSet s(0b1011'0000);
  EXPECT_EQ(s.Count(), 3);
  EXPECT_TRUE(s.Contains(4));
  EXPECT_FALSE(s.Contains(6));
  EXPECT_FALSE(s.Contains(-1));
  EXPECT_FALSE(s.Contains(64));
  EXPECT_EQ(s.Lowest(), 4);
  EXPECT_EQ(s.LowestN(2), GpuSet(0b0011'0000));
  EXPECT_EQ(s.LowestN(10), s);
  EXPECT_THAT(s.Indices(), ElementsAre(4, 5, 7));
}

TEST(GpuSetTest, SetAlgebra) {
  GpuSet a(0b1100), b(0b0110);
  EXPECT_EQ((a | b).bits(), 0b1110u);
  EXPECT_EQ((a & b).bits(), 0b0100u);
  EXPECT_EQ((a - b).bits(), 0b1000u);
  EXPECT_TRUE(GpuSet(0b1110).ContainsAll(a));
  EXPECT_FALSE(a.ContainsAll(b));
}

TEST(GpuSetTest, FromIndicesRejectsIndexSixtyFour) {
  EXPECT_EQ(GpuSet::FromIndices({0, 63}).value().bits(), (uint64_t{1} << 63) | 1);
  absl::StatusOr<GpuSet> bad = GpuSet::FromIndices({1, 64});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("GPU index 64 is outside 0..63"));
  EXPECT_FALSE(GpuSet::FromIndices({-1}).ok());
}

TEST(GpuSetTest, ParseAndPrintRoundTrip) {
  EXPECT_EQ(GpuSet::Parse("0-3,6").value().bits(), 0b0100'1111u);
  EXPECT_EQ(GpuSet::Parse(" 1 , 2 ").value().bits(), 0b110u);
  EXPECT_TRUE(GpuSet::Parse("").value().Empty());
  EXPECT_EQ(GpuSet(0b0100'1111).ToString(), "0-3,6");
  EXPECT_EQ(GpuSet().ToString(), "");
  EXPECT_EQ(GpuSet::FirstN(64).ToString(), "0-63");
  GpuSet odd(0xaaaa'aaaa'aaaa'aaaa);
  EXPECT_EQ(GpuSet::Parse(odd.ToString()).value(), odd);
}

TEST(GpuSetTest, ParseErrorsNameThePart) {
  EXPECT_THAT(GpuSet::Parse("0-64").status().message(),
              HasSubstr("GPU index 64 in '0-64' is outside 0..63"));
  EXPECT_THAT(GpuSet::Parse("3-1").status().message(), HasSubstr("range '3-1' is reversed"));
  EXPECT_THAT(GpuSet::Parse("a").status().message(), HasSubstr("'a' is not a GPU index"));
  EXPECT_THAT(GpuSet::Parse("1,,2").status().message(), HasSubstr("empty element"));
  EXPECT_FALSE(GpuSet::Parse("-1").ok());
  EXPECT_FALSE(GpuSet::Parse("1-2-3").ok());
}

TEST(GpuSetTest, BitmapShowsFreeAndUsed) {
  EXPECT_EQ(GpuSet(0b0101).ToBitmap(4), "■□■□");
  EXPECT_EQ(GpuSet().ToBitmap(0), "");
}

}  // namespace
}  // namespace trainyard::core
