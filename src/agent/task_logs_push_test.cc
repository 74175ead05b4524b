// LogPusher: what is there is sent in bounded pieces, no more than the
// window ahead of the acknowledgements; followed logs are pushed as they
// grow and end with the attempt; the cap on subscriptions is a clear error.
#include "agent/task_logs_push.h"

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/log_capture.h"
#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;

class LogPusherTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(logs_.Prepare(key_).ok()); }

  LogPusher& Pusher(LogPusherOptions options = {}) {
    pusher_ = std::make_unique<LogPusher>(&logs_, options, [this](const LogPiece& p) {
      std::lock_guard<std::mutex> lock(mu_);
      pieces_.push_back(p);
      cv_.notify_all();
      return true;
    });
    return *pusher_;
  }
  void Append(const std::string& text, int attempt = 0) {
    std::ofstream(logs_.Path(key_, attempt, LogStream::kStdout), std::ios::app | std::ios::binary) << text;
  }
  // Waits until `n` pieces have arrived (10 s at most); returns them.
  std::vector<LogPiece> WaitPieces(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return pieces_.size() >= n; });
    return pieces_;
  }
  std::string Received() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const LogPiece& p : pieces_) all += p.data;
    return all;
  }

  testing::TempDir dir_;
  TaskLogs logs_{dir_.path()};
  TaskKey key_{"j", "worker", 0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<LogPiece> pieces_;
  std::unique_ptr<LogPusher> pusher_;
};

TEST_F(LogPusherTest, SendsWhatIsThereInBoundedPiecesThenEof) {
  Append(std::string(150 << 10, 'x'));
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 7, .key = key_, .attempt = 0, .chunk_bytes = 64 << 10}).ok());
  std::vector<LogPiece> got = WaitPieces(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].data.size(), 64u << 10);
  EXPECT_EQ(got[1].offset, 64 << 10);
  EXPECT_EQ(got[2].data.size(), 22u << 10);
  EXPECT_FALSE(got[1].eof);
  EXPECT_TRUE(got[2].eof);
  EXPECT_FALSE(got[2].finished);  // the attempt has not ended
  EXPECT_TRUE(testing::WaitUntil([&] { return p.subscriptions() == 0; }));
}

TEST_F(LogPusherTest, SendsNoMoreThanTheWindowAheadOfTheAcknowledgements) {
  Append(std::string(300 << 10, 'x'));
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 1, .key = key_, .attempt = 0, .chunk_bytes = 64 << 10,
                           .window_bytes = 128 << 10}).ok());
  ASSERT_EQ(WaitPieces(2).size(), 2u);
  // Paced: the third piece waits for the server to take the first.
  EXPECT_EQ(WaitPieces(0).size(), 2u);
  p.Ack(1, 64 << 10);
  std::vector<LogPiece> got = WaitPieces(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].offset, 128 << 10);
  EXPECT_EQ(got[2].data.size(), 64u << 10);
}

TEST_F(LogPusherTest, FollowPushesEachWriteAndEndsWithTheAttempt) {
  Append("first\n");
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 2, .key = key_, .attempt = 0, .follow = true}).ok());
  ASSERT_EQ(WaitPieces(1).size(), 1u);
  EXPECT_EQ(Received(), "first\n");
  p.Ack(2, 6);
  Append("second\n");  // seen through inotify: nothing polls
  ASSERT_TRUE(testing::WaitUntil([&] { return Received() == "first\nsecond\n"; })) << Received();
  ASSERT_TRUE(logs_.MarkEnded(key_, 0, TaskExit{}).ok());
  ASSERT_TRUE(testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu_);
    return !pieces_.empty() && pieces_.back().finished;
  }));
  EXPECT_EQ(Received(), "first\nsecond\n");
  EXPECT_TRUE(testing::WaitUntil([&] { return p.subscriptions() == 0; }));
}

TEST_F(LogPusherTest, FollowWaitsForALogThatDoesNotExistYet) {
  TaskKey later{"j", "ps", 3};  // its directory does not exist either
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 3, .key = later, .attempt = 1, .follow = true}).ok());
  ASSERT_TRUE(logs_.Prepare(later).ok());
  std::ofstream(logs_.Path(later, 1, LogStream::kStdout)) << "hello\n";
  ASSERT_TRUE(testing::WaitUntil([&] { return Received() == "hello\n"; })) << Received();
  EXPECT_EQ(p.subscriptions(), 1u);
}

TEST_F(LogPusherTest, AnAttemptThatEndedWithoutALogFinishesEmpty) {
  LogPusher& p = Pusher();
  ASSERT_TRUE(logs_.MarkEnded(key_, 4, TaskExit{.exit_code = -1}).ok());
  ASSERT_TRUE(p.Subscribe({.id = 4, .key = key_, .attempt = 4, .follow = true}).ok());
  std::vector<LogPiece> got = WaitPieces(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].finished);
  EXPECT_TRUE(got[0].data.empty());
}

TEST_F(LogPusherTest, AMissingLogIsAnErrorWhenNotFollowing) {
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 5, .key = key_, .attempt = 9}).ok());
  std::vector<LogPiece> got = WaitPieces(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].error, HasSubstr("no log for task j/worker-0 attempt 9"));
}

TEST_F(LogPusherTest, RefusesSubscriptionsPastItsLimitAndCancelFreesOne) {
  Append("x");
  LogPusher& p = Pusher({.max_subscriptions = 2});
  ASSERT_TRUE(p.Subscribe({.id = 1, .key = key_, .attempt = 0, .follow = true}).ok());
  ASSERT_TRUE(p.Subscribe({.id = 2, .key = key_, .attempt = 0, .follow = true}).ok());
  absl::Status third = p.Subscribe({.id = 3, .key = key_, .attempt = 0, .follow = true});
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.message(), HasSubstr("2 log subscriptions, its limit"));
  p.Cancel(1);
  EXPECT_TRUE(p.Subscribe({.id = 3, .key = key_, .attempt = 0, .follow = true}).ok());
  p.CancelAll();
  EXPECT_EQ(p.subscriptions(), 0u);
}

TEST_F(LogPusherTest, RejectsABadTaskKey) {
  LogPusher& p = Pusher();
  EXPECT_EQ(p.Subscribe({.id = 1, .key = {"..", "w", 0}, .attempt = 0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LogPusherTest, FollowGoesOnAcrossTheKeepersRotations) {
  int dir_fd = open(logs_.TaskDir(key_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  LogCapture capture;
  ASSERT_TRUE(capture.Open(dir_fd, "attempt-0.stdout", 4 << 10));
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 8, .key = key_, .attempt = 0, .follow = true}).ok());
  std::string want;
  for (int i = 0; i < 300; ++i) {
    std::string line = absl::StrCat("line ", i, " of a task that writes a lot\n");
    capture.Write(line.data(), line.size(), 1000 + i);
    want += line;
    // The reader keeps up (a slow one is told what was dropped instead).
    if (i % 10 == 9) {
      ASSERT_TRUE(testing::WaitUntil([&] { return testing::Unstamped(Received()) == want; })) << i;
    }
  }
  capture.Close();
  close(dir_fd);
  EXPECT_GT(logs_.Segments(key_, 0, LogStream::kStdout).size(), 1u);
  EXPECT_EQ(p.subscriptions(), 1u);  // still following
}

TEST_F(LogPusherTest, ATailSubscriptionStartsAtTheLastLinesAndSaysWhere) {
  int dir_fd = open(logs_.TaskDir(key_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  LogCapture capture;
  ASSERT_TRUE(capture.Open(dir_fd, "attempt-0.stdout", 0));
  for (int i = 0; i < 100; ++i) {
    std::string line = absl::StrCat("line ", i, "\n");
    capture.Write(line.data(), line.size(), 1000 + i);
  }
  capture.Close();
  close(dir_fd);
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 9, .key = key_, .attempt = 0, .tail_lines = 2}).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return p.subscriptions() == 0; }));
  EXPECT_EQ(testing::Unstamped(Received()), "line 98\nline 99\n");
  std::vector<LogPiece> got = WaitPieces(1);
  EXPECT_GT(got[0].offset, 0);
}

TEST_F(LogPusherTest, AFollowFromTheEndSaysAtOnceWhereItStartedThenPushesWhatComes) {
  Append("before\n");
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 4, .key = key_, .attempt = 0, .follow = true, .tail_lines = 0}).ok());
  // Nothing new yet: still a first piece, empty, at the end it chose.
  std::vector<LogPiece> got = WaitPieces(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, "");
  EXPECT_EQ(got[0].offset, 7);
  EXPECT_FALSE(got[0].finished);
  Append("after\n");
  ASSERT_TRUE(testing::WaitUntil([&] { return Received() == "after\n"; })) << Received();
  EXPECT_EQ(WaitPieces(2)[1].offset, 7);
}

TEST_F(LogPusherTest, AFollowFromTheEndOfALogNotWrittenYetSaysItStartsAtItsBeginning) {
  TaskKey later{"j", "ps", 5};  // not started: no log, no end
  LogPusher& p = Pusher();
  ASSERT_TRUE(p.Subscribe({.id = 6, .key = later, .attempt = 0, .follow = true, .tail_lines = 0}).ok());
  std::vector<LogPiece> got = WaitPieces(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].offset, 0);
  EXPECT_EQ(got[0].data, "");
  EXPECT_TRUE(got[0].error.empty()) << got[0].error;
  ASSERT_TRUE(logs_.Prepare(later).ok());
  std::ofstream(logs_.Path(later, 0, LogStream::kStdout)) << "first words\n";
  ASSERT_TRUE(testing::WaitUntil([&] { return Received() == "first words\n"; })) << Received();
  EXPECT_EQ(WaitPieces(2)[1].offset, 0);
}

}  // namespace
}  // namespace trainyard::agent
