// Tests for PortRanges: parsing and printing, errors that name the wrong
// part, set algebra against a brute-force model, and taking the lowest N.
#include "core/resources/port_ranges.h"

#include <bitset>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;

PortRanges P(std::string_view text) { return PortRanges::Parse(text).value(); }

TEST(PortRangesTest, ParsesBracketedAndListForms) {
  EXPECT_EQ(P("[1-65535]").Count(), 65535u);
  PortRanges r = P("1000-2000,3000,4000-4010");
  EXPECT_EQ(r.ranges().size(), 3u);
  EXPECT_EQ(r.Count(), 1001u + 1 + 11);
  EXPECT_EQ(r.ToString(), "1000-2000,3000,4000-4010");
  EXPECT_EQ(P(" [ 10 - 20 ] , [30-40] ").ToString(), "10-20,30-40");
  EXPECT_TRUE(P("").Empty());
  EXPECT_TRUE(P("[]").Empty());
}

TEST(PortRangesTest, ParseMergesOverlapsAndNeighbours) {
  EXPECT_EQ(P("5-10,1-4,8-12,20").ToString(), "1-12,20");
  EXPECT_EQ(P("3,2,1").ToString(), "1-3");
}

TEST(PortRangesTest, ParseErrorsNameThePart) {
  EXPECT_THAT(PortRanges::Parse("2000-1000").status().message(),
              HasSubstr("range '2000-1000' is reversed"));
  EXPECT_THAT(PortRanges::Parse("0-10").status().message(),
              HasSubstr("port 0 in '0-10' is outside 1..65535"));
  EXPECT_THAT(PortRanges::Parse("1-65536").status().message(),
              HasSubstr("port 65536 in '1-65536' is outside 1..65535"));
  EXPECT_THAT(PortRanges::Parse("http").status().message(),
              HasSubstr("'http' is not a port or a range"));
  EXPECT_THAT(PortRanges::Parse("1,,2").status().message(), HasSubstr("empty element"));
  EXPECT_FALSE(PortRanges::Parse("-5").ok());
  EXPECT_FALSE(PortRanges::Parse("99999999999999999999").ok());
  EXPECT_FALSE(PortRanges::Parse("1-2-3").ok());
}

TEST(PortRangesTest, OfChecksBounds) {
  EXPECT_EQ(PortRanges::Of(1, 65535).value().Count(), 65535u);
  EXPECT_THAT(PortRanges::Of(10, 5).status().message(), HasSubstr("reversed"));
  EXPECT_THAT(PortRanges::Of(0, 5).status().message(), HasSubstr("outside 1..65535"));
  EXPECT_FALSE(PortRanges::Of(5, 70000).ok());
}

TEST(PortRangesTest, ContainsAndContainsAll) {
  PortRanges r = P("10-20,30");
  EXPECT_TRUE(r.Contains(10));
  EXPECT_TRUE(r.Contains(30));
  EXPECT_FALSE(r.Contains(21));
  EXPECT_FALSE(r.Contains(31));
  EXPECT_TRUE(r.ContainsAll(P("12-15,30")));
  EXPECT_FALSE(r.ContainsAll(P("19-21")));
  EXPECT_TRUE(r.ContainsAll(PortRanges()));
}

TEST(PortRangesTest, TakeLowestSpansRanges) {
  PortRanges r = P("10-12,20-29");
  EXPECT_EQ(r.TakeLowest(5)->ToString(), "10-12,20-21");
  EXPECT_EQ(r.TakeLowest(0)->ToString(), "");
  EXPECT_EQ(r.TakeLowest(13)->ToString(), "10-12,20-29");
  EXPECT_FALSE(r.TakeLowest(14).has_value());
}

TEST(PortRangesTest, AddIgnoresInvalidRanges) {
  PortRanges r;
  r.Add({5, 1});
  r.Add({0, 3});
  EXPECT_TRUE(r.Empty());
}

// A brute-force model over ports 1..200 checks union, subtract, intersect.
using Model = std::bitset<201>;

PortRanges RandomSet(std::mt19937& rng, Model* model) {
  PortRanges out;
  std::uniform_int_distribution<int> port(1, 200), len(0, 15), n(0, 6);
  for (int i = n(rng); i > 0; --i) {
    uint32_t b = port(rng);
    uint32_t e = std::min<uint32_t>(200, b + len(rng));
    out.Add({b, e});
    for (uint32_t p = b; p <= e; ++p) model->set(p);
  }
  return out;
}

void ExpectMatches(const PortRanges& r, const Model& m) {
  for (size_t i = 0; i < r.ranges().size(); ++i) {
    const PortRange& range = r.ranges()[i];
    ASSERT_LE(range.begin, range.end);
    if (i > 0) {
      ASSERT_GT(range.begin, r.ranges()[i - 1].end + 1) << "ranges must be sorted, non-adjacent";
    }
  }
  for (uint32_t p = 1; p <= 200; ++p) ASSERT_EQ(r.Contains(p), m.test(p)) << p;
  ASSERT_EQ(r.Count(), m.count());
}

TEST(PortRangesTest, SetAlgebraMatchesBruteForce) {
  std::mt19937 rng(20261129);
  for (int round = 0; round < 500; ++round) {
    Model ma, mb;
    PortRanges a = RandomSet(rng, &ma);
    PortRanges b = RandomSet(rng, &mb);
    ExpectMatches(a, ma);
    ExpectMatches(a.Union(b), ma | mb);
    ExpectMatches(a.Subtract(b), ma & ~mb);
    ExpectMatches(a.Intersect(b), ma & mb);
    EXPECT_EQ(a.ContainsAll(b), (mb & ~ma).none());
    EXPECT_EQ(P(a.ToString()), a);
  }
}

}  // namespace
}  // namespace trainyard::core
