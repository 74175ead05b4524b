// The log line format: stamps round-trip and lines come out whole however
// their bytes are cut.
#include "api/log_lines.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

struct Line {
  int64_t nanos;
  std::string text;
  bool operator==(const Line&) const = default;
};

// Feeds `data` in pieces of `step` bytes and joins the pieces into lines.
std::vector<Line> Split(const std::string& data, size_t step) {
  LogSplitter s;
  std::vector<Line> lines;
  auto emit = [&](const LogPiece& p) {
    if (p.line_start) lines.push_back({p.unix_nanos, ""});
    lines.back().text += std::string(p.text);
  };
  for (size_t at = 0; at < data.size(); at += step) s.Add(data.substr(at, step), emit);
  s.Finish(emit);
  return lines;
}

TEST(LogLinesTest, StampsRoundTripAndTextWithoutOneIsKept) {
  EXPECT_EQ(LogStamp(1733047251123456789), "1733047251123456789 ");
  EXPECT_EQ(ParseLogStamp(LogStamp(42) + "x"), 42);
  EXPECT_EQ(ParseLogStamp("12 hello"), std::nullopt);
  EXPECT_EQ(FormatLogTime(1733047251123456789), "2024-12-01T10:00:51.123456789Z");
}

// A stamp of 19 digits above int64's range overflowed (undefined behaviour;
// a negative time in practice): such a line's start is text.
TEST(LogLinesTest, NineteenDigitsAboveInt64AreNoStamp) {
  EXPECT_EQ(ParseLogStamp("9223372036854775807 x"), INT64_MAX);
  EXPECT_EQ(ParseLogStamp("9223372036854775808 x"), std::nullopt);
  EXPECT_EQ(ParseLogStamp("9999999999999999999 x"), std::nullopt);
  std::vector<Line> lines = Split("9999999999999999999 text\n", 4);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], (Line{0, "9999999999999999999 text\n"}));
}

TEST(LogLinesTest, SinceIsADurationBackFromNowOrATime) {
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(ParseLogSince("10m", now), absl::ToUnixNanos(now - absl::Minutes(10)));
  EXPECT_EQ(ParseLogSince("1h30m", now), absl::ToUnixNanos(now - absl::Minutes(90)));
  EXPECT_EQ(ParseLogSince("2026-12-01T10:00:00Z", now), int64_t{1796119200} * 1000000000);
  EXPECT_EQ(ParseLogSince("-5m", now), std::nullopt);
  EXPECT_EQ(ParseLogSince("yesterday", now), std::nullopt);
}

TEST(LogLinesTest, LinesComeOutWholeHoweverTheBytesAreCut) {
  std::string data = LogStamp(1) + "first\n" + LogStamp(2) + "second\n" + "unstamped\n" + LogStamp(3) + "no end";
  std::vector<Line> want = {{1, "first\n"}, {2, "second\n"}, {0, "unstamped\n"}, {3, "no end"}};
  for (size_t step : {1u, 3u, 19u, 20u, 21u, 1000u}) EXPECT_EQ(Split(data, step), want) << step;
  EXPECT_EQ(Split("12345", 2), (std::vector<Line>{{0, "12345"}}));  // a cut-off "stamp" is text
}

}  // namespace
}  // namespace trainyard::api
