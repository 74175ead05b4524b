// The keeper's log writer (rotation, cap, stamps) read back through
// TaskLogs as the agent reads it, and a real task's stdout and stderr
// interleaved by their stamps.
#include "agent/log_capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "agent/supervisor.h"
#include "agent/task_logs.h"
#include "agent/test_util.h"
#include "api/log_lines.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::Unstamped;

class LogCaptureTest : public ::testing::Test {
 protected:
  LogCaptureTest() : logs_(dir_.path()) {
    EXPECT_TRUE(logs_.Prepare(key_).ok());
    dir_fd_ = open(logs_.TaskDir(key_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~LogCaptureTest() override { close(dir_fd_); }

  // Everything a reader from `offset` gets, piece by piece, as Follow does.
  std::string ReadFrom(int64_t* offset) {
    std::string all;
    for (;;) {
      absl::StatusOr<LogChunk> c = logs_.Read(key_, {.attempt = 0, .offset = *offset, .limit = 300});
      EXPECT_TRUE(c.ok()) << c.status();
      if (!c.ok() || c->next_offset == *offset) return all;
      all += c->data;
      *offset = c->next_offset;
    }
  }
  int64_t KeptBytes() {
    int64_t kept = 0;
    for (const LogSegment& s : logs_.Segments(key_, 0, LogStream::kStdout)) kept += s.size;
    return kept;
  }

  TempDir dir_;
  TaskLogs logs_;
  TaskKey key_{.job = "j", .role = "worker", .index = 0};
  int dir_fd_ = -1;
};

TEST_F(LogCaptureTest, EachLineIsStampedWithTheTimeItWasRead) {
  LogCapture c;
  ASSERT_TRUE(c.Open(dir_fd_, "attempt-0.stdout", 0));
  c.Write("one\ntw", 6, 1000);
  c.Write("o\nthree\n", 8, 2000);
  c.Close();
  EXPECT_EQ(testing::ReadFileOrEmpty(logs_.Path(key_, 0, LogStream::kStdout)),
            api::LogStamp(1000) + "one\n" + api::LogStamp(1000) + "two\n" + api::LogStamp(2000) + "three\n");
}

TEST_F(LogCaptureTest, AChattyLogIsCappedKeepsItsNewestLinesAndSaysWhatWasDropped) {
  constexpr int64_t kCap = 16 << 10;
  LogCapture c;
  ASSERT_TRUE(c.Open(dir_fd_, "attempt-0.stdout", kCap));
  int64_t follower = 0;  // a reader that keeps up, as -f does
  std::string followed;
  std::string line(79, 'x');
  for (int i = 0; i < 2000; ++i) {
    std::string text = absl::StrCat(i, " ", line, "\n");
    c.Write(text.data(), text.size(), 1000 + i);
    if (i % 20 == 0) followed += ReadFrom(&follower);
    EXPECT_LE(KeptBytes(), kCap + LogSegmentBytes(kCap)) << "after line " << i;
  }
  c.Close();
  followed += ReadFrom(&follower);
  // The follower saw every line once, in order, across every rotation.
  std::vector<std::string> lines = absl::StrSplit(Unstamped(followed), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2000u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(lines[i], absl::StrCat(i, " ", line)) << i;
  EXPECT_GT(logs_.Segments(key_, 0, LogStream::kStdout).size(), 1u);

  // A reader from the start learns how much was dropped, then gets the
  // newest lines, ending with the last.
  int64_t from_start = 0;
  std::string text = Unstamped(ReadFrom(&from_start));
  EXPECT_THAT(text, HasSubstr("bytes of this log were dropped here"));
  EXPECT_TRUE(absl::EndsWith(text, absl::StrCat("1999 ", line, "\n"))) << text.substr(text.size() - 200);
  EXPECT_EQ(logs_.Attempts(key_).value(), std::vector<int>{0});  // the first segment is gone, the attempt is not
}

TEST_F(LogCaptureTest, TailAndSinceStartAtTheLinesAskedFor) {
  LogCapture c;
  ASSERT_TRUE(c.Open(dir_fd_, "attempt-0.stdout", 8 << 10));
  for (int i = 0; i < 500; ++i) {
    std::string text = absl::StrCat("line ", i, "\n");
    c.Write(text.data(), text.size(), 1000 + i);
  }
  c.Close();
  auto from = [&](int tail, int64_t since) {
    int64_t offset = logs_.StartOffset(key_, 0, LogStream::kStdout, tail, since).value();
    return Unstamped(ReadFrom(&offset));
  };
  EXPECT_EQ(from(2, 0), "line 498\nline 499\n");
  EXPECT_EQ(from(0, 0), "");
  EXPECT_EQ(from(-1, 1000 + 497), "line 497\nline 498\nline 499\n");
  EXPECT_EQ(from(1, 1000 + 300), "line 499\n");
  EXPECT_EQ(from(-1, 5000), "");
}

TEST(LogCaptureTaskTest, ATasksStdoutAndStderrInterleaveByTheirStamps) {
  TempDir dir;
  FakeClock clock{absl::FromUnixSeconds(1700000000)};
  auto supervisor = Supervisor::Create({.data_dir = dir.path() + "/data", .clock = &clock});
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  TaskLaunch l;
  l.key = {.job = "mix", .role = "worker", .index = 0};
  std::string logs = (*supervisor)->logs().TaskDir(l.key);
  // Each line waits until the keeper has written the one before (the task
  // orders its own writes; the test does not wait on a timer).
  auto after = [&](const std::string& file, const std::string& text) {
    return absl::StrCat("until grep -q '", text, "' ", logs, "/", file, " 2>/dev/null; do sleep 0.01; done; ");
  };
  l.command = {"sh", "-c",
               absl::StrCat("echo out1; ", after("attempt-0.stdout", "out1"), "echo err1 >&2; ",
                            after("attempt-0.stderr", "err1"), "echo out2; ", after("attempt-0.stdout", "out2"),
                            "echo err2 >&2")};
  l.working_dir = dir.path();
  ASSERT_TRUE((*supervisor)->Launch(l).ok());
  ASSERT_TRUE((*supervisor)->WaitFor(l.key, [](const TaskStatus& s) { return IsFinal(s.state); }, absl::Seconds(30)));
  std::vector<std::pair<int64_t, std::string>> lines;
  for (LogStream stream : {LogStream::kStdout, LogStream::kStderr}) {
    std::string log = (*supervisor)->logs().Read(l.key, {.attempt = 0, .stream = stream}).value().data;
    for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
      std::optional<int64_t> stamp = api::ParseLogStamp(line);
      ASSERT_TRUE(stamp.has_value()) << line;
      lines.emplace_back(*stamp, std::string(line.substr(api::kLogStampBytes)));
    }
  }
  std::sort(lines.begin(), lines.end());
  std::vector<std::string> order;
  for (const auto& [t, text] : lines) order.push_back(text);
  EXPECT_THAT(order, ::testing::ElementsAre("out1", "err1", "out2", "err2"));
  int64_t now = absl::ToUnixNanos(absl::Now());
  EXPECT_GT(lines.front().first, now - absl::ToInt64Nanoseconds(absl::Minutes(5)));  // stamped with the real time
  EXPECT_LE(lines.back().first, now);
}

}  // namespace
}  // namespace trainyard::agent
