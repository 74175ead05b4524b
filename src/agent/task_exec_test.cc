#include "agent/task_exec.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using testing::TempDir;
using testing::WaitUntil;

// What the sink received, session by session.
class Received {
 public:
  bool Take(const ExecPiece& piece) {
    absl::MutexLock lock(&mu_);
    pieces_.push_back(piece);
    return true;
  }
  std::vector<ExecPiece> Of(uint64_t id) const {
    absl::MutexLock lock(&mu_);
    std::vector<ExecPiece> out;
    for (const ExecPiece& p : pieces_) {
      if (p.id == id) out.push_back(p);
    }
    return out;
  }
  bool Ended(uint64_t id) const {
    std::vector<ExecPiece> all = Of(id);
    return !all.empty() && all.back().exited;
  }
  std::string Output(uint64_t id, bool is_stderr) const {
    std::string text;
    for (const ExecPiece& p : Of(id)) {
      if (p.is_stderr == is_stderr) text += p.data;
    }
    return text;
  }
  int64_t OutputBytes(uint64_t id) const {
    int64_t n = 0;
    for (const ExecPiece& p : Of(id)) n += static_cast<int64_t>(p.data.size());
    return n;
  }
  ExecPiece Last(uint64_t id) const { return Of(id).back(); }

 private:
  mutable absl::Mutex mu_;
  std::vector<ExecPiece> pieces_;
};

class TaskExecTest : public ::testing::Test {
 protected:
  TaskExecTest()
      : exec_([this](const TaskKey& key) { return Resolve(key); }, TaskExecOptions{.chunk_bytes = 4096},
              [this](const ExecPiece& p) { return received_.Take(p); }) {}

  absl::StatusOr<ExecTarget> Resolve(const TaskKey& key) {
    if (key.role != "worker") return absl::FailedPreconditionError(absl::StrCat("task ", key.ToString(), " is not running here"));
    ExecTarget t;
    t.attempt = 2;
    t.env = {"PATH=" + task_path_, "TRAINYARD_ROLE=worker", "TERM=dumb"};
    t.working_dir = dir_.path();
    if (as_nobody_) t.run_as = TaskAccount{.name = "nobody", .uid = 65534, .gid = 65534};
    return t;
  }

  ExecOrder Order(uint64_t id, std::vector<std::string> command) {
    return ExecOrder{.id = id, .key = TaskKey{"train", "worker", 0, 7}, .command = std::move(command), .user = "alice"};
  }

  bool WaitEnded(uint64_t id) {
    return WaitUntil([&] { return received_.Ended(id); }, absl::Seconds(30));
  }

  TempDir dir_;
  bool as_nobody_ = false;
  std::string task_path_ = "/usr/bin:/bin";
  Received received_;
  TaskExec exec_;
};

TEST_F(TaskExecTest, ACommandRunsInTheTasksDirAndEnvironmentAndItsExitCodeComesBack) {
  exec_.Open(Order(1, {"sh", "-c", "echo $TRAINYARD_ROLE in $(pwd); echo oops >&2; exit 3"}), 0);
  ASSERT_TRUE(WaitEnded(1));
  std::vector<ExecPiece> all = received_.Of(1);
  ASSERT_TRUE(all.front().started);
  EXPECT_EQ(all.front().attempt, 2);
  EXPECT_EQ(received_.Output(1, false),
            absl::StrCat("worker in ", std::filesystem::canonical(dir_.path()).string(), "\n"));
  EXPECT_EQ(received_.Output(1, true), "oops\n");
  EXPECT_EQ(all.back().exit_code, 3);
  EXPECT_EQ(all.back().signal, 0);
  EXPECT_EQ(all.back().error, "");
  EXPECT_EQ(exec_.sessions(), 0);
}

TEST_F(TaskExecTest, InputReachesTheCommandAndItsEndClosesStdin) {
  ExecOrder order = Order(2, {"cat"});
  order.stdin = true;
  exec_.Open(order, 0);
  exec_.Feed({.id = 2, .data = "hello\n"}, 0);
  ASSERT_TRUE(WaitUntil([&] { return received_.Output(2, false) == "hello\n"; }, absl::Seconds(30)));
  exec_.Feed({.id = 2, .data = "bye\n", .eof = true}, 0);
  ASSERT_TRUE(WaitEnded(2));
  EXPECT_EQ(received_.Output(2, false), "hello\nbye\n");
  EXPECT_EQ(received_.Last(2).exit_code, 0);
  int64_t taken = 0;
  for (const ExecPiece& p : received_.Of(2)) taken = std::max(taken, p.input_taken);
  EXPECT_EQ(taken, 10);
}

TEST_F(TaskExecTest, InputForACommandThatClosedItsStdinIsDroppedAndCountedAsTaken) {
  ExecOrder order = Order(20, {"sh", "-c", "exec 0<&-; echo closed; sleep 0.5; echo alive"});
  order.stdin = true;
  exec_.Open(order, 0);
  ASSERT_TRUE(WaitUntil([&] { return received_.Output(20, false) == "closed\n"; }, absl::Seconds(30)));
  exec_.Feed({.id = 20, .data = "nobody reads this\n"}, 0);  // EPIPE, not the agent's end (SIGPIPE)
  ASSERT_TRUE(WaitEnded(20));
  EXPECT_EQ(received_.Output(20, false), "closed\nalive\n");
  EXPECT_EQ(received_.Last(20).exit_code, 0);
  int64_t taken = 0;
  for (const ExecPiece& p : received_.Of(20)) taken = std::max(taken, p.input_taken);
  EXPECT_EQ(taken, 18);
}

TEST_F(TaskExecTest, SessionsOfAnotherStreamAreApartEvenWithTheSameId) {
  ExecOrder order = Order(21, {"cat"});
  order.stdin = true;
  exec_.Open(order, /*tag=*/1);
  exec_.Open(order, /*tag=*/2);  // a new server's stream reuses the id
  exec_.Open(order, /*tag=*/2);  // a repeat on one stream is refused
  ASSERT_TRUE(WaitUntil([&] { return exec_.sessions() == 2; }, absl::Seconds(30)));
  exec_.Feed({.id = 21, .data = "to two\n", .eof = true}, 2);
  ASSERT_TRUE(WaitUntil([&] {
    int ended = 0;
    for (const ExecPiece& p : received_.Of(21)) ended += p.exited;
    return ended == 2;
  }, absl::Seconds(30)));
  std::string two, one;
  std::vector<std::string> errors;
  for (const ExecPiece& p : received_.Of(21)) {
    (p.tag == 2 ? two : one) += p.data;
    if (p.exited && !p.error.empty()) errors.push_back(p.error);
  }
  EXPECT_EQ(two, "to two\n");
  EXPECT_EQ(one, "");
  EXPECT_THAT(errors, ::testing::ElementsAre("a session of this id is open already"));
  exec_.DropTag(1);
  ASSERT_TRUE(WaitUntil([&] { return exec_.sessions() == 0; }, absl::Seconds(30)));
}

TEST_F(TaskExecTest, WithoutStdinTheCommandReadsNothing) {
  exec_.Open(Order(3, {"sh", "-c", "cat; echo done"}), 0);
  ASSERT_TRUE(WaitEnded(3));
  EXPECT_EQ(received_.Output(3, false), "done\n");
}

TEST_F(TaskExecTest, ATerminalHasTheSizeAskedAndTheClientsTerm) {
  ExecOrder order = Order(4, {"sh", "-c", "test -t 0 && test -t 1 && echo terminal $TERM; stty size"});
  order.tty = true;
  order.rows = 30;
  order.cols = 100;
  order.term = "xterm-256color";
  exec_.Open(order, 0);
  ASSERT_TRUE(WaitEnded(4));
  std::string out = received_.Output(4, false);
  EXPECT_TRUE(absl::StrContains(out, "terminal xterm-256color")) << out;
  EXPECT_TRUE(absl::StrContains(out, "30 100")) << out;
  EXPECT_EQ(received_.Last(4).exit_code, 0);
}

TEST_F(TaskExecTest, OutputBeyondTheWindowWaitsForAcknowledgements) {
  ExecOrder order = Order(5, {"head", "-c", "1000000", "/dev/zero"});
  order.window_bytes = 65536;
  exec_.Open(order, 0);
  ASSERT_TRUE(WaitUntil([&] { return received_.OutputBytes(5) == 65536; }, absl::Seconds(30)));
  // Nothing more comes while nothing is acknowledged.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(received_.OutputBytes(5), 65536);
  EXPECT_FALSE(received_.Ended(5));
  // The server takes what came, again and again, until the end.
  ASSERT_TRUE(WaitUntil(
      [&] {
        exec_.Feed({.id = 5, .acked = received_.OutputBytes(5)}, 0);
        return received_.Ended(5);
      },
      absl::Seconds(60)));
  EXPECT_EQ(received_.OutputBytes(5), 1000000);
  EXPECT_EQ(received_.Last(5).exit_code, 0);
  int64_t expect = 0;
  for (const ExecPiece& p : received_.Of(5)) {
    if (p.data.empty()) continue;
    EXPECT_EQ(p.offset, expect);
    expect += static_cast<int64_t>(p.data.size());
  }
}

TEST_F(TaskExecTest, TheClientsGoingHangsTheCommandUp) {
  exec_.Open(Order(6, {"sleep", "1000"}), 0);
  ASSERT_TRUE(WaitUntil([&] { return !received_.Of(6).empty(); }, absl::Seconds(30)));
  exec_.Feed({.id = 6, .close = true}, 0);
  ASSERT_TRUE(WaitEnded(6));
  EXPECT_EQ(received_.Last(6).signal, SIGHUP);
  EXPECT_EQ(received_.Last(6).error, "the client has gone");
}

TEST_F(TaskExecTest, ACommandThatIgnoresTheHangupIsKilledAfterTheGrace) {
  exec_.Open(Order(7, {"sh", "-c", "trap '' HUP; echo ready; sleep 1000 & wait"}), 0);
  ASSERT_TRUE(WaitUntil([&] { return received_.Output(7, false) == "ready\n"; }, absl::Seconds(30)));
  exec_.Feed({.id = 7, .close = true}, 0);
  ASSERT_TRUE(WaitEnded(7));
  EXPECT_EQ(received_.Last(7).signal, SIGKILL);
}

TEST_F(TaskExecTest, TheTasksEndEndsItsCommandsAndTheStreamsEndEndsItsOwn) {
  exec_.Open(Order(8, {"sleep", "1000"}), 0);
  exec_.Open(Order(9, {"sleep", "1000"}), /*tag=*/5);
  ASSERT_TRUE(WaitUntil([&] { return !received_.Of(8).empty() && !received_.Of(9).empty(); }, absl::Seconds(30)));
  exec_.TaskEnded(TaskKey{"train", "worker", 1, 7});  // another task: nothing ends
  exec_.DropTag(5);
  ASSERT_TRUE(WaitEnded(9));
  EXPECT_EQ(received_.Last(9).error, "the server's stream is gone");
  EXPECT_FALSE(received_.Ended(8));
  exec_.TaskEnded(TaskKey{"train", "worker", 0, 7});
  ASSERT_TRUE(WaitEnded(8));
  EXPECT_EQ(received_.Last(8).signal, SIGKILL);
  EXPECT_EQ(received_.Last(8).error, "the task's attempt ended");
}

TEST_F(TaskExecTest, RefusalsNameTheReason) {
  ExecOrder not_running = Order(10, {"true"});
  not_running.key.role = "ps";
  exec_.Open(not_running, 0);
  exec_.Open(Order(11, {"no-such-command-here"}), 0);
  exec_.Open(Order(12, {}), 0);
  ASSERT_TRUE(WaitEnded(10) && WaitEnded(11) && WaitEnded(12));
  EXPECT_EQ(received_.Last(10).error, "task train/ps-0 is not running here");
  EXPECT_TRUE(absl::StrContains(received_.Last(11).error, "cannot run the command no-such-command-here"))
      << received_.Last(11).error;
  EXPECT_EQ(received_.Last(12).error, "command: must not be empty");
  EXPECT_EQ(received_.Last(10).code, static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(received_.Last(12).code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(received_.Of(11).front().started);
}

TEST_F(TaskExecTest, TheCommandIsFoundInTheTasksPath) {
  std::filesystem::create_directories(dir_.path() + "/bin");
  std::ofstream(dir_.path() + "/bin/only-in-task-path") << "#!/bin/sh\necho found it\n";
  chmod((dir_.path() + "/bin/only-in-task-path").c_str(), 0755);
  task_path_ = dir_.path() + "/bin:/usr/bin:/bin";
  exec_.Open(Order(22, {"only-in-task-path"}), 0);
  ASSERT_TRUE(WaitEnded(22));
  EXPECT_EQ(received_.Output(22, false), "found it\n") << received_.Last(22).error;
}

TEST_F(TaskExecTest, ACommandRunsAsTheTasksAccountWithNoNewPrivileges) {
  if (geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  as_nobody_ = true;
  chmod(dir_.path().c_str(), 0755);
  exec_.Open(Order(13, {"sh", "-c", "id -u; id -g; grep NoNewPrivs /proc/self/status"}), 0);
  ASSERT_TRUE(WaitEnded(13));
  EXPECT_EQ(received_.Output(13, false), "65534\n65534\nNoNewPrivs:\t1\n");
}

}  // namespace
}  // namespace trainyard::agent
