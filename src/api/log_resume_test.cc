// LogResume: a followed log opened again after the server went away shows
// each line once, none lost: what the new stream brings again is taken out,
// to the byte within a line that was cut.
#include "api/log_resume.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

v1::LogChunk Data(const std::string& task, int attempt, const std::string& data, bool err = false) {
  v1::LogChunk c;
  c.set_task(task);
  c.set_attempt(attempt);
  c.set_data(data);
  c.set_stderr(err);
  return c;
}

v1::LogChunk Start(const std::string& task, int attempt) {
  v1::LogChunk c;
  c.set_task(task);
  c.set_attempt(attempt);
  c.set_attempt_start(true);
  return c;
}

// What passes of `chunk` ("" when dropped).
std::string Passed(LogResume& r, v1::LogChunk chunk) { return r.Take(chunk) ? chunk.data() : ""; }

// The client's clock when the first stream opened; stamps are nanoseconds after it.
constexpr int64_t kOpened = 1'700'000'000'000'000'000;
constexpr int64_t kSecond = 1'000'000'000;

std::string L(int64_t after, const std::string& text) { return LogStamp(kOpened + after) + text; }

TEST(LogResumeTest, WhatTheNewStreamBringsAgainIsTakenOutToTheByte) {
  LogResume r(kOpened);
  EXPECT_TRUE([&] { v1::LogChunk c = Start("w-0", 0); return r.Take(c); }());
  // Two lines whole and a third cut after "hel"; the next stamp cut in two.
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "a\n") + L(200, "b\n") + L(300, "hel"))),
            L(100, "a\n") + L(200, "b\n") + L(300, "hel"));
  EXPECT_EQ(Passed(r, Data("w-0", 0, "lo\n" + L(400, "c\n").substr(0, 7))), "lo\n");

  v1::LogsRequest req;
  req.set_follow(true);
  req.set_tail_lines(10);
  r.Resume(req, kOpened + 2 * kSecond);
  // From when the first stream opened, less the clocks' skew: an output
  // not seen yet may have lines from then on.
  EXPECT_EQ(req.since_unix_nanos(), kOpened - kClockSkewNanos);
  EXPECT_FALSE(req.has_tail_lines());
  // The new stream starts again at that line, its attempt_start included.
  EXPECT_FALSE([&] { v1::LogChunk c = Start("w-0", 0); return r.Take(c); }());
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(300, "hello\n") + L(400, "c\n") + L(500, "d"))), L(400, "c\n") + L(500, "d"));
}

TEST(LogResumeTest, ALineCutAfterItsStampOnlyGoesOnWithItsText) {
  LogResume r(kOpened);
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "a\n") + L(200, ""))), L(100, "a\n") + L(200, ""));
  v1::LogsRequest req;
  r.Resume(req, kOpened + kSecond);
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "a\n") + L(200, "b\n"))), "b\n");
}

TEST(LogResumeTest, LinesWithTheSameStampAreToldApartByTheirOrder) {
  LogResume r(kOpened);
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "x\n") + L(100, "y\n"))), L(100, "x\n") + L(100, "y\n"));
  v1::LogsRequest req;
  r.Resume(req, kOpened + kSecond);
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "x\n"))), "");
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "y\n") + L(100, "z\n"))), L(100, "z\n"));
}

TEST(LogResumeTest, EachTaskAndOutputIsTakenOutOnItsOwnFromTheEarliestLastLine) {
  LogResume r(kOpened);
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "a\n") + L(500, "b\n"))), L(100, "a\n") + L(500, "b\n"));
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(300, "e\n"), /*err=*/true)), L(300, "e\n"));
  EXPECT_EQ(Passed(r, Data("w-1", 2, L(200, "p\n"))), L(200, "p\n"));
  v1::LogsRequest req;
  req.set_since_unix_nanos(kOpened - kSecond);  // --since: a later start is kept
  r.Resume(req, kOpened + kSecond);
  EXPECT_EQ(req.since_unix_nanos(), kOpened - kSecond);
  EXPECT_EQ(Passed(r, Data("w-1", 2, L(200, "p\n") + L(250, "q\n"))), L(250, "q\n"));
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(300, "e\n") + L(600, "f\n"), true)), L(600, "f\n"));
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(500, "b\n") + L(700, "c\n"))), L(700, "c\n"));
  // A task restarted in the gap: its new attempt is all new.
  EXPECT_TRUE([&] { v1::LogChunk c = Start("w-1", 3); return r.Take(c); }());
  EXPECT_EQ(Passed(r, Data("w-1", 3, L(150, "again\n"))), L(150, "again\n"));
  // A task that had shown nothing before the cut shows all it brings.
  EXPECT_EQ(Passed(r, Data("w-2", 0, L(120, "late\n"))), L(120, "late\n"));
}

TEST(LogResumeTest, AfterALongFollowTheStreamOpensAgainOnlyAsFarBackAsALineMayLag) {
  LogResume r(kOpened);
  const int64_t hour = 3600 * kSecond;
  // One output quiet since the start, one writing an hour later.
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(100, "early\n"))), L(100, "early\n"));
  EXPECT_EQ(Passed(r, Data("w-1", 0, L(hour, "now\n"))), L(hour, "now\n"));
  v1::LogsRequest req;
  r.Resume(req, kOpened + hour + kSecond);
  EXPECT_EQ(req.since_unix_nanos(), kOpened + hour + kSecond - kDeliveryLagNanos);
  EXPECT_EQ(Passed(r, Data("w-1", 0, L(hour, "now\n") + L(hour + 10, "next\n"))), L(hour + 10, "next\n"));
  EXPECT_EQ(Passed(r, Data("w-0", 0, L(hour + 20, "woke\n"))), L(hour + 20, "woke\n"));
}

TEST(LogResumeTest, WithoutAResumeEverythingPassesAsItCame) {
  LogResume r(kOpened);
  std::string all;
  for (const std::string& piece : {L(1, "one\n").substr(0, 5), L(1, "one\n").substr(5), std::string("two"), L(2, "x\n")}) {
    all += Passed(r, Data("t", 0, piece));
  }
  // A stamp cut by a chunk's end passes whole; a line without one as it came.
  EXPECT_EQ(all, L(1, "one\n") + "two" + L(2, "x\n"));
}

}  // namespace
}  // namespace trainyard::api
