// The rank host's handshake and commands as a caller and a node meet them:
// the secret proven both ways and never sent, a hello's one deadline, and a
// command stopped whole (its process group) when its caller goes away or the
// host is stopped.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/client/rank_host_command.h"
#include "jobmaster/client/rank_host_wire.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

const std::string kSecret = "the job's secret, 32 bytes long!";

// A connected pair of sockets, closed at the end (fds close-on-exec, as the
// rank host's are: a command must see none of them).
struct Wire {
  Wire() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    caller = fds[0];
    host = fds[1];
  }
  ~Wire() {
    CloseCaller();
    if (host >= 0) close(host);
  }
  void CloseCaller() {
    if (caller >= 0) close(caller);
    caller = -1;
  }
  int caller = -1;
  int host = -1;
};

std::string Nonce(char c) { return std::string(kRankHostNonceBytes, c); }

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// Reads one whole frame from `fd`, as bytes.
std::string ReadRawFrame(int fd) {
  std::string frame(5, '\0');
  if (read(fd, frame.data(), 5) != 5) return "";
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(frame[1 + i])) << (8 * i);
  frame.resize(5 + n);
  for (size_t at = 5; at < frame.size();) {
    ssize_t r = read(fd, frame.data() + at, frame.size() - at);
    if (r <= 0) return "";
    at += static_cast<size_t>(r);
  }
  return frame;
}

TEST(RankHostWireTest, ACallerAndItsRankHostProveTheSecretToEachOther) {
  Wire wire;
  auto greeted = std::async(std::launch::async, [&] {
    return GreetRankHost(wire.caller, kSecret, "orted -mca ess env", Nonce('c'), In(absl::Seconds(10)));
  });
  absl::StatusOr<std::string> command = AcceptCaller(wire.host, kSecret, Nonce('h'), In(absl::Seconds(10)));
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(*command, "orted -mca ess env");
  EXPECT_TRUE(greeted.get().ok());
}

TEST(RankHostWireTest, AWrongSecretIsRefusedAndTheCallerToldWhy) {
  Wire wire;
  auto greeted = std::async(std::launch::async, [&] {
    return GreetRankHost(wire.caller, "a guess", "touch /tmp/owned", Nonce('c'), In(absl::Seconds(10)));
  });
  absl::StatusOr<std::string> command = AcceptCaller(wire.host, kSecret, Nonce('h'), In(absl::Seconds(10)));
  EXPECT_EQ(command.status().code(), absl::StatusCode::kPermissionDenied);
  absl::Status status = greeted.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("not this job's secret"));
}

// Whatever took the rank host's port first (another user's task on the
// node) sees a hello without the secret, cannot replay it on another
// connection or change its command, and is not trusted.
TEST(RankHostWireTest, APortSquatterLearnsNothingItCanUseAndIsNotTrusted) {
  Wire wire;
  auto greeted = std::async(std::launch::async, [&] {
    return GreetRankHost(wire.caller, kSecret, "orted -mca ess env", Nonce('c'), In(absl::Seconds(10)));
  });
  ASSERT_TRUE(SendFrame(wire.host, 'C', Nonce('s')));
  std::string hello = ReadRawFrame(wire.host);
  ASSERT_FALSE(hello.empty());
  EXPECT_EQ(hello.find(kSecret), std::string::npos) << "the secret crossed the wire";
  ASSERT_TRUE(SendFrame(wire.host, 'A', std::string(32, 'x')));
  absl::Status status = greeted.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  EXPECT_THAT(status.message(), HasSubstr("did not prove it holds the job's secret"));

  // The same hello to the real host: taken for the nonce it answered, not
  // for the host's own; nor with another command.
  auto replay = [&](const std::string& bytes, const std::string& host_nonce) {
    Wire again;
    EXPECT_EQ(write(again.caller, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    return AcceptCaller(again.host, kSecret, host_nonce, In(absl::Seconds(10))).status();
  };
  EXPECT_TRUE(replay(hello, Nonce('s')).ok()) << "the recorded hello is a right one";
  EXPECT_EQ(replay(hello, Nonce('h')).code(), absl::StatusCode::kPermissionDenied);
  std::string changed = hello;
  changed.back() = 'X';
  EXPECT_EQ(replay(changed, Nonce('s')).code(), absl::StatusCode::kPermissionDenied);
}

// A peer that sends one byte now and then holds a waiting slot only until
// the hello's deadline, not for as long as it keeps sending.
TEST(RankHostWireTest, AHelloHasOneDeadlineHoweverSlowlyItComes) {
  Wire wire;
  std::atomic<bool> stop{false}, done{false};
  std::thread dripper([&] {
    std::string head = {'H', 100, 0, 0, 0};
    EXPECT_EQ(write(wire.caller, head.data(), head.size()), 5);
    for (int i = 0; i < 100 && !stop; ++i) {
      if (write(wire.caller, "x", 1) != 1) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    done = true;
  });
  absl::StatusOr<std::string> command = AcceptCaller(wire.host, kSecret, Nonce('h'), In(absl::Milliseconds(500)));
  bool dripping = !done;
  stop = true;
  dripper.join();
  EXPECT_EQ(command.status().code(), absl::StatusCode::kDeadlineExceeded) << command.status();
  EXPECT_TRUE(dripping) << "the hello was read until the peer stopped sending";
}

TEST(RankHostWireTest, ACallerWaitsForTheChallengeOnlyUntilItsDeadline) {
  Wire wire;
  absl::Status status = GreetRankHost(wire.caller, kSecret, "true", Nonce('c'), In(absl::Milliseconds(200)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

// Runs `command` as the rank host would and relays it on a wire whose
// caller end the test holds.
class RankCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rank_host_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    std::filesystem::remove_all(dir_);
  }

  void Start(const std::string& command, absl::Duration grace = kRankCommandGrace) {
    absl::StatusOr<RankCommand> started = StartRankCommand(command);
    ASSERT_TRUE(started.ok()) << started.status();
    group_ = started->pid;
    relay_ = std::async(std::launch::async, [this, c = *started, grace]() mutable {
      return RelayRankCommand(wire_.host, c, grace);
    });
  }

  // The exit status, once the relay ends within `timeout`; -1 if it does not
  // (its group is then killed, so that the test ends).
  int RelayEnds(absl::Duration timeout = absl::Seconds(20)) {
    if (relay_.wait_for(absl::ToChronoMilliseconds(timeout)) != std::future_status::ready) {
      kill(-group_, SIGKILL);
      for (pid_t pid : pids_) kill(pid, SIGKILL);
      relay_.wait();
      return -1;
    }
    return relay_.get();
  }

  // The pid the command wrote to `file`, once it has.
  pid_t PidIn(const std::string& file) {
    pid_t pid = 0;
    EXPECT_TRUE(WaitUntil([&] {
      std::ifstream in(file);
      std::stringstream s;
      s << in.rdbuf();
      return absl::SimpleAtoi(absl::StripAsciiWhitespace(s.str()), &pid) && pid > 0;
    }));
    pids_.push_back(pid);
    return pid;
  }

  static bool Gone(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t paren = stat.rfind(')');
    return paren == std::string::npos || stat.substr(paren + 2, 1) == "Z";  // a zombie has ended
  }

  // The relay's end (RelayEnds) and what the caller end read: stdout and
  // stderr bytes.
  struct Ended {
    int code = -1;
    std::string out;
    std::string err;
  };
  Ended Finish() {
    Ended ended{.code = RelayEnds()};
    shutdown(wire_.host, SHUT_WR);
    for (;;) {
      std::string frame = ReadRawFrame(wire_.caller);
      if (frame.empty()) return ended;
      (frame[0] == 'O' ? ended.out : ended.err).append(frame.substr(5));
    }
  }

  // A background grandchild of the shell that ignores SIGTERM (as a daemon
  // might), holding the output pipes; its pid goes to `file` once it does.
  static std::string StubbornGrandchild(const std::string& file) {
    return absl::StrCat("sh -c 'trap \"\" TERM; echo $$ > ", file, "; exec sleep 1000' & wait");
  }

  std::string dir_;
  Wire wire_;
  pid_t group_ = -1;
  std::future<int> relay_;
  std::vector<pid_t> pids_;
};

TEST_F(RankCommandTest, ItsOutputAndExitStatusComeBack) {
  Start("echo out; echo err >&2; exit 3");
  Ended ended = Finish();
  EXPECT_EQ(ended.code, 3);
  EXPECT_EQ(ended.out, "out\n");
  EXPECT_EQ(ended.err, "err\n");
}

TEST_F(RankCommandTest, ItGetsNoDescriptorOfTheRankHostsButItsStdio) {
  // The descriptors this process would pass on to any child.
  std::set<std::string> inherited = {"0", "1", "2"};
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = 0;
    std::string name = entry.path().filename().string();
    if (absl::SimpleAtoi(name, &fd) && fcntl(fd, F_GETFD) == 0) inherited.insert(name);
  }
  // The shell's own descriptors (the glob's, closed once it is expanded, left out).
  Start("cd /proc/$$/fd && for f in *; do [ -e \"$f\" ] && echo \"$f\"; done; true");
  Ended ended = Finish();
  EXPECT_EQ(ended.code, 0);
  EXPECT_EQ(ended.err, "");
  std::vector<std::string> fds = absl::StrSplit(ended.out, '\n', absl::SkipEmpty());
  EXPECT_THAT(fds, ::testing::IsSupersetOf({"0", "1", "2"}));
  for (const std::string& fd : fds) EXPECT_TRUE(inherited.count(fd)) << "fd " << fd << " leaked into the shell";
}

TEST_F(RankCommandTest, ACallerGoneStopsTheCommandsWholeGroup) {
  std::string file = dir_ + "/pid";
  Start(StubbornGrandchild(file), absl::Milliseconds(200));
  pid_t grandchild = PidIn(file);
  ASSERT_FALSE(Gone(grandchild));
  wire_.CloseCaller();  // mpirun stopped its `trainyard rsh`
  EXPECT_EQ(RelayEnds(), 128 + SIGTERM) << "the relay did not end";
  EXPECT_TRUE(WaitUntil([&] { return Gone(grandchild); })) << "pid " << grandchild << " outlived its caller";
}

TEST_F(RankCommandTest, StoppingTheRankHostStopsEveryRunningCommand) {
  std::string file = dir_ + "/pid";
  Start(StubbornGrandchild(file));
  pid_t grandchild = PidIn(file);
  StopRankCommands(absl::Milliseconds(200));
  EXPECT_NE(RelayEnds(), -1) << "the relay did not end";
  EXPECT_TRUE(WaitUntil([&] { return Gone(grandchild); })) << "pid " << grandchild << " outlived the rank host";
}

}  // namespace
}  // namespace trainyard::jobmaster
