// Supervisor tests with real processes (sh scripts) in temporary directories:
// environment, process groups, logs per attempt, restart policies, kills,
// exit reporting, limits and re-adoption after an agent restart. The
// supervisor's clock is a FakeClock: restart delays and kill grace periods
// pass only when a test advances it.
#include "agent/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/test_util.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::RecordingListener;
using testing::TempDir;
using testing::WaitUntil;
using testing::kTimeout;
using testing::Final;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto supervisor =
        Supervisor::Create({.data_dir = dir_.path() + "/data", .clock = &clock_, .listener = &listener_});
    ASSERT_TRUE(supervisor.ok()) << supervisor.status();
    supervisor_ = *std::move(supervisor);
  }
  void TearDown() override {
    supervisor_->KillAll();
    for (const TaskStatus& s : supervisor_->Snapshot()) {
      EXPECT_TRUE(supervisor_->WaitFor(s.key, Final, kTimeout).has_value());
    }
    supervisor_.reset();
  }

  // A task running `script` with sh, in its own directory under the temp dir.
  // Restarts start at once (no backoff) unless a test sets one.
  TaskLaunch ShellTask(const std::string& role, const std::string& script) {
    TaskLaunch l;
    l.key = {.job = absl::StrCat("t", getpid(), "-", ::testing::UnitTest::GetInstance()->current_test_info()->name()),
             .role = role,
             .index = 0};
    l.command = {"sh", "-c", script};
    l.working_dir = absl::StrCat(dir_.path(), "/", role);
    std::filesystem::create_directories(l.working_dir);
    l.backoff_initial = absl::ZeroDuration();
    l.kill_grace = absl::Seconds(5);
    return l;
  }

  TaskStatus RunToEnd(const TaskLaunch& l) {
    EXPECT_TRUE(supervisor_->Launch(l).ok());
    std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
    EXPECT_TRUE(s.has_value());
    EXPECT_TRUE(IsFinal(s->state)) << TaskStateName(s->state);
    return *s;
  }

  std::map<std::string, std::string> EnvFile(const std::string& path) {
    std::map<std::string, std::string> env;
    for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(path), '\n')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
      if (!kv.first.empty()) env[kv.first] = kv.second;
    }
    return env;
  }

  // Waits for the task's last reported status to be `state` at `attempt`.
  std::optional<TaskStatus> WaitForState(const TaskKey& key, TaskState state, int attempt) {
    return supervisor_->WaitFor(
        key, [&](const TaskStatus& s) { return s.state == state && s.attempt == attempt; }, kTimeout);
  }

  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(1700000000)};
  RecordingListener listener_;
  std::unique_ptr<ResourceLimiter> limiter_;  // a test's own, when it sets one
  std::unique_ptr<Supervisor> supervisor_;
};

TEST_F(SupervisorTest, InjectsTrainyardEnvironmentAndGpus) {
  TaskLaunch l = ShellTask("worker", "env > env.txt");
  l.key.index = 3;
  l.worker_id = 7;
  l.gpus = *core::GpuSet::FromIndices({6, 1, 3});
  l.ports = *core::PortRanges::Parse("31000-31001,31005");
  l.env = {{"TRAINYARD_JOB_MASTER", "10.0.0.1:7000"}, {"MY_VAR", "x y"}};
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kSucceeded);
  std::map<std::string, std::string> env = EnvFile(l.working_dir + "/env.txt");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,3,6");
  EXPECT_EQ(env["TRAINYARD_JOB"], l.key.job);
  EXPECT_EQ(env["TRAINYARD_ROLE"], "worker");
  EXPECT_EQ(env["TRAINYARD_INDEX"], "3");
  EXPECT_EQ(env["TRAINYARD_WORKER_ID"], "7");
  EXPECT_EQ(env["TRAINYARD_PORTS"], "31000,31001,31005");
  EXPECT_EQ(env["TRAINYARD_RESTART_COUNT"], "0");
  EXPECT_EQ(env["TRAINYARD_ATTEMPT"], "0");
  EXPECT_EQ(env["TRAINYARD_JOB_MASTER"], "10.0.0.1:7000");
  EXPECT_EQ(env["MY_VAR"], "x y");
  EXPECT_THAT(env["TRAINYARD_CHECKPOINT_DIR"], HasSubstr("/checkpoints/" + l.key.job + "/worker-3"));
  EXPECT_TRUE(std::filesystem::is_directory(env["TRAINYARD_CHECKPOINT_DIR"]));
  EXPECT_FALSE(env["PATH"].empty());  // inherited from the agent
}

TEST_F(SupervisorTest, NoGpusGiveEmptyCudaVisibleDevices) {
  TaskLaunch l = ShellTask("ps", "env > env.txt");
  ASSERT_EQ(RunToEnd(l).state, TaskState::kSucceeded);
  std::map<std::string, std::string> env = EnvFile(l.working_dir + "/env.txt");
  ASSERT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 1u);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["TRAINYARD_PORTS"], "");
}

TEST_F(SupervisorTest, RunsInOwnProcessGroupAndWorkingDir) {
  // /proc/PID/stat fields 5 and 6 are the process group and session: both
  // the task's keeper (the pid the supervisor reports), not the agent's.
  TaskLaunch l = ShellTask("worker", "cut -d' ' -f5,6 /proc/$$/stat > pgrp; pwd > cwd");
  ASSERT_EQ(RunToEnd(l).state, TaskState::kSucceeded);
  std::vector<TaskStatus> all = listener_.statuses();
  ASSERT_FALSE(all.empty());
  const TaskStatus* running = &all.front();
  ASSERT_EQ(running->state, TaskState::kRunning);
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/pgrp"), absl::StrCat(running->pid, " ", running->pid, "\n"));
  EXPECT_NE(running->pid, getpgrp());
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/cwd"), l.working_dir + "\n");
}

TEST_F(SupervisorTest, AgentDescriptorsDoNotLeakIntoTasks) {
  int fd = open("/dev/null", O_RDONLY);  // not close-on-exec, as a careless library might
  ASSERT_GE(fd, 3);
  TaskLaunch l = ShellTask("worker", absl::StrCat("[ -e /proc/$$/fd/", fd, " ] && echo leaked > leak; echo $$ > done"));
  ASSERT_EQ(RunToEnd(l).state, TaskState::kSucceeded);
  close(fd);
  EXPECT_FALSE(ReadFileOrEmpty(l.working_dir + "/done").empty());
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/leak"), "");
}

TEST_F(SupervisorTest, OnFailureRestartsUntilSuccessWithLogsPerAttempt) {
  // Fails on its first two attempts, counted in a file.
  TaskLaunch l = ShellTask("worker",
                           "echo \"out $TRAINYARD_RESTART_COUNT\"; echo \"err $TRAINYARD_RESTART_COUNT\" >&2;"
                           "echo x >> count; [ $(wc -l < count) -ge 3 ]");
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 5;
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kSucceeded);
  EXPECT_EQ(s.attempt, 2);
  EXPECT_EQ(s.restarts, 2);
  EXPECT_EQ(s.exit.exit_code, 0);
  EXPECT_THAT(listener_.StatesOf(l.key),
              ElementsAre(TaskState::kRunning, TaskState::kRestarting, TaskState::kRunning,
                          TaskState::kRestarting, TaskState::kRunning, TaskState::kSucceeded));
  // Logs of every attempt stay readable after the task ended.
  EXPECT_THAT(supervisor_->logs().Attempts(l.key).value(), ElementsAre(0, 1, 2));
  absl::StatusOr<LogChunk> out = supervisor_->logs().Read(l.key, {.attempt = 1});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(testing::Unstamped(out->data), "out 1\n");
  EXPECT_TRUE(out->complete);
  absl::StatusOr<LogChunk> err = supervisor_->logs().Read(l.key, {.attempt = 0, .stream = LogStream::kStderr});
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(testing::Unstamped(err->data), "err 0\n");
  absl::StatusOr<LogChunk> latest = supervisor_->logs().Read(l.key, {.offset = api::kLogStampBytes + 2, .limit = 2});
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->data, "t ");
  EXPECT_FALSE(latest->complete);
  EXPECT_EQ(supervisor_->logs().Read(l.key, {.attempt = 9}).status().code(), absl::StatusCode::kNotFound);
  // A key from the wire cannot reach outside the data dir.
  EXPECT_THAT(supervisor_->logs().Read({.job = "..", .role = "x"}, {}).status().message(),
              HasSubstr("job \"..\" must be non-empty, not . or .., without '/'"));
  EXPECT_EQ(supervisor_->logs().Read({.job = "a/b", .role = "x"}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SupervisorTest, EveryStartOfAResumedLaunchCountsTheStartsBeforeIt) {
  // The server resumes a task at its attempt 2; the agent restarts it once.
  TaskLaunch l = ShellTask("worker", "env > env-$TRAINYARD_ATTEMPT.txt; echo x >> count; [ $(wc -l < count) -ge 2 ]");
  l.attempt = 2;
  l.env = {{"TRAINYARD_ATTEMPT", "2"}, {"TRAINYARD_RESTART_COUNT", "2"}};  // as the server sends them
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 3;
  ASSERT_EQ(RunToEnd(l).state, TaskState::kSucceeded);
  std::map<std::string, std::string> second = EnvFile(l.working_dir + "/env-2.txt");
  std::map<std::string, std::string> third = EnvFile(l.working_dir + "/env-3.txt");
  EXPECT_EQ(second["TRAINYARD_RESTART_COUNT"], "2");
  EXPECT_EQ(third["TRAINYARD_RESTART_COUNT"], "3");
  EXPECT_EQ(third["TRAINYARD_ATTEMPT"], "3");
}

TEST_F(SupervisorTest, BackoffDoublesAndStartsAgainAfterAnAttemptThatRanLong) {
  // Attempts 0-2 fail at once, attempt 3 waits on a FIFO (the test holds it
  // while the clock moves 2 x backoff_max) and fails, attempt 4 succeeds.
  TaskLaunch l = ShellTask("worker",
                           "echo x >> count; n=$(wc -l < count); [ $n -eq 4 ] && read line < gate; [ $n -ge 5 ]");
  ASSERT_EQ(mkfifo((l.working_dir + "/gate").c_str(), 0600), 0);
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 5;
  l.backoff_initial = absl::Milliseconds(10);
  l.backoff_max = absl::Milliseconds(40);
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::vector<std::string> delays;
  for (int attempt = 0; attempt <= 3; ++attempt) {
    if (attempt == 3) {
      ASSERT_TRUE(WaitForState(l.key, TaskState::kRunning, 3));
      clock_.Advance(2 * l.backoff_max);
      int gate = -1;  // a writer can open a FIFO only once its reader has
      ASSERT_TRUE(WaitUntil([&] { return (gate = open((l.working_dir + "/gate").c_str(), O_WRONLY | O_NONBLOCK)) >= 0; }));
      ASSERT_EQ(write(gate, "go\n", 3), 3);
      close(gate);
    }
    std::optional<TaskStatus> restarting = WaitForState(l.key, TaskState::kRestarting, attempt);
    ASSERT_TRUE(restarting) << "attempt " << attempt;
    // "... restart N of 5 in 10ms": what the user reads, and when the clock
    // lets the next attempt start.
    delays.push_back(restarting->message.substr(restarting->message.rfind(' ') + 1));
    absl::Duration delay;
    ASSERT_TRUE(absl::ParseDuration(delays.back(), &delay)) << restarting->message;
    EXPECT_EQ(supervisor_->Status(l.key)->state, TaskState::kRestarting);
    clock_.Advance(delay);
  }
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, TaskState::kSucceeded);
  EXPECT_EQ(s->attempt, 4);
  EXPECT_THAT(delays, ElementsAre("10ms", "20ms", "40ms", "10ms"));
}

TEST_F(SupervisorTest, MaxRestartsExhaustedReportsFinalFailure) {
  TaskLaunch l = ShellTask("worker", "exit 3");
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 2;
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kFailed);
  EXPECT_EQ(s.exit.exit_code, 3);
  EXPECT_EQ(s.attempt, 2);
  EXPECT_EQ(s.restarts, 2);
  EXPECT_THAT(s.message, HasSubstr("exited with code 3; max restarts 2 exhausted after 3 attempts"));
  std::vector<TaskStatus> all = listener_.statuses();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().state, TaskState::kFailed);
  EXPECT_TRUE(all.back().has_exit);
  EXPECT_EQ(all.back().exit.exit_code, 3);
}

TEST_F(SupervisorTest, NeverPolicyDoesNotRestart) {
  TaskLaunch l = ShellTask("worker", "echo x >> count; exit 1");
  l.restart_policy = RestartPolicy::kNever;
  l.max_restarts = 3;
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kFailed);
  EXPECT_EQ(s.restarts, 0);
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/count"), "x\n");
  EXPECT_THAT(listener_.StatesOf(l.key), ElementsAre(TaskState::kRunning, TaskState::kFailed));
}

TEST_F(SupervisorTest, AlwaysPolicyRestartsAfterSuccessUntilBudget) {
  TaskLaunch l = ShellTask("ps", "echo x >> count");
  l.restart_policy = RestartPolicy::kAlways;
  l.max_restarts = 2;
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kSucceeded);
  EXPECT_EQ(s.restarts, 2);
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/count"), "x\nx\nx\n");
}

TEST_F(SupervisorTest, KillSendsTermThenKillToTaskThatTrapsTerm) {
  TaskLaunch l = ShellTask("worker",
                           "trap 'echo got-term >> trapped' TERM; echo ready > ready;"
                           "while true; do sleep 0.05; done");
  l.kill_grace = absl::Milliseconds(300);
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_TRUE(WaitUntil([&] { return !ReadFileOrEmpty(l.working_dir + "/ready").empty(); }));
  ASSERT_TRUE(supervisor_->Kill(l.key).ok());
  // It got SIGTERM, trapped it and runs on: the grace period has not passed.
  ASSERT_TRUE(WaitUntil([&] { return ReadFileOrEmpty(l.working_dir + "/trapped") == "got-term\n"; }));
  EXPECT_EQ(supervisor_->Status(l.key)->state, TaskState::kRunning);
  clock_.Advance(l.kill_grace);
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, TaskState::kKilled);
  EXPECT_EQ(s->exit.signal, SIGKILL);
}

TEST_F(SupervisorTest, KillStopsPlainTaskWithTerm) {
  TaskLaunch l = ShellTask("worker", "exec sleep 30");
  l.restart_policy = RestartPolicy::kAlways;
  l.max_restarts = 5;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_TRUE(supervisor_->WaitFor(l.key, [](const TaskStatus& s) { return s.pid > 0; }, kTimeout));
  ASSERT_TRUE(supervisor_->Kill(l.key).ok());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  EXPECT_EQ(s->state, TaskState::kKilled);
  EXPECT_EQ(s->exit.signal, SIGTERM);
  EXPECT_EQ(s->restarts, 0);  // a kill is never restarted
}

TEST_F(SupervisorTest, ReportsSignalAndExitCode) {
  TaskLaunch l = ShellTask("worker", "kill -USR1 $$");
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kFailed);
  EXPECT_EQ(s.exit.signal, SIGUSR1);
  EXPECT_EQ(s.exit.exit_code, -1);
  EXPECT_FALSE(s.exit.oom_killed);
  EXPECT_THAT(s.message, HasSubstr("killed by signal 10"));
}

TEST_F(SupervisorTest, CommandNotFoundFailsWithReasonInStatusAndLog) {
  TaskLaunch l = ShellTask("worker", "");
  l.command = {"trainyard-no-such-command"};
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kFailed);
  EXPECT_EQ(s.exit.exit_code, 127);
  EXPECT_THAT(s.message, HasSubstr("cannot run the command trainyard-no-such-command"));
  absl::StatusOr<LogChunk> err = supervisor_->logs().Read(l.key, {.stream = LogStream::kStderr});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_THAT(err->data, HasSubstr("trainyard-no-such-command"));
}

// A limiter whose cgroup join, for tasks of the role "slow", is a FIFO: such
// a task's set-up waits in its open until the test opens the other end.
class GateLimiter : public ResourceLimiter {
 public:
  explicit GateLimiter(std::string gate) : gate_(std::move(gate)) {}
  LimiterKind kind() const override { return LimiterKind::kNone; }
  const Confinement& confinement() const override { return confinement_; }
  absl::StatusOr<PreparedLimits> Prepare(const std::string& name, const TaskLimits&) override {
    PreparedLimits limits;
    if (name.find("slow") != std::string::npos) limits.procs_files.push_back(gate_);
    return limits;
  }
  bool OomKilled(const std::string&) override { return false; }
  void Release(const std::string&) override {}

 private:
  std::string gate_;
  Confinement confinement_;
};

TEST_F(SupervisorTest, AnotherTaskStartsWhileOnesSetUpWaitsAndAKillThenWaitsForItsStart) {
  std::string gate = dir_.path() + "/gate";
  ASSERT_EQ(mkfifo(gate.c_str(), 0600), 0);
  limiter_ = std::make_unique<GateLimiter>(gate);
  auto supervisor = Supervisor::Create(
      {.data_dir = dir_.path() + "/gated", .clock = &clock_, .limiter = limiter_.get(), .listener = &listener_});
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  supervisor_ = *std::move(supervisor);

  TaskLaunch slow = ShellTask("slow", "touch started; sleep 60");
  ASSERT_TRUE(supervisor_->Launch(slow).ok());
  TaskLaunch fast = ShellTask("fast", "touch ran; sleep 60");
  ASSERT_TRUE(supervisor_->Launch(fast).ok());
  // The second runs while the first's set-up is still held at the gate.
  ASSERT_TRUE(WaitForState(fast.key, TaskState::kRunning, 0).has_value());
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(fast.working_dir + "/ran"); }, kTimeout));
  std::optional<TaskStatus> held = supervisor_->Status(slow.key);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->state, TaskState::kLaunching);
  EXPECT_FALSE(std::filesystem::exists(slow.working_dir + "/started"));

  // Killed while it starts: the SIGTERM waits for its exec, then ends it
  // (the clock never reaches the SIGKILL).
  ASSERT_TRUE(supervisor_->Kill(slow.key).ok());
  int reader = open(gate.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  char joined = 0;
  EXPECT_EQ(read(reader, &joined, 1), 1);
  close(reader);
  std::optional<TaskStatus> end = supervisor_->WaitFor(slow.key, Final, kTimeout);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, TaskState::kKilled);
  EXPECT_EQ(end->exit.signal, SIGTERM);
}

TEST_F(SupervisorTest, AnAttemptTheNodeCannotStartFailsWithItsReasonInItsLog) {
  // An image task on a node with no OCI runtime (this supervisor has none).
  TaskLaunch l = ShellTask("worker", "true");
  l.image = TaskImage{.ref = "oci:/srv/images/x:1", .rootfs = dir_.path() + "/rootfs"};
  TaskStatus s = RunToEnd(l);
  EXPECT_EQ(s.state, TaskState::kFailed);
  EXPECT_THAT(s.message, HasSubstr("no OCI runtime"));
  absl::StatusOr<LogChunk> err = supervisor_->logs().Read(l.key, {.stream = LogStream::kStderr});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_THAT(err->data, HasSubstr("this node has no OCI runtime (runc or crun) to run image oci:/srv/images/x:1"));
}

TEST_F(SupervisorTest, RejectsBadLaunches) {
  TaskLaunch l = ShellTask("worker", "sleep 30");
  TaskLaunch empty = l;
  empty.command.clear();
  EXPECT_THAT(supervisor_->Launch(empty).message(), HasSubstr("command must not be empty"));
  TaskLaunch escaping = l;
  escaping.key.role = "../../etc";
  EXPECT_THAT(supervisor_->Launch(escaping).message(), HasSubstr("without '/'"));
  TaskLaunch no_dir = l;
  no_dir.working_dir = "/nonexistent/trainyard";
  EXPECT_THAT(supervisor_->Launch(no_dir).message(), HasSubstr("working_dir /nonexistent/trainyard does not exist"));
  TaskLaunch negative = l;
  negative.max_restarts = -1;
  EXPECT_THAT(supervisor_->Launch(negative).message(), HasSubstr("max_restarts"));
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  EXPECT_EQ(supervisor_->Launch(l).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(supervisor_->Kill({.job = "nope", .role = "x"}).code(), absl::StatusCode::kNotFound);
}

TEST_F(SupervisorTest, FollowReadsLogUntilAttemptEnds) {
  TaskLaunch l = ShellTask("worker", "for i in 1 2 3; do echo line $i; sleep 0.05; done");
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_TRUE(WaitUntil([&] { return supervisor_->logs().Attempts(l.key).ok(); }));
  std::string all;
  absl::Status s = supervisor_->logs().Follow(l.key, {.attempt = 0}, [&](const std::string& piece) {
    all += piece;
    return true;
  }, absl::Milliseconds(10));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(testing::Unstamped(all), "line 1\nline 2\nline 3\n");
}

TEST_F(SupervisorTest, FollowLogsContinuesAcrossRestarts) {
  TaskLaunch l = ShellTask("worker", "echo a$TRAINYARD_RESTART_COUNT; echo x >> count; [ $(wc -l < count) -ge 3 ]");
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 5;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::string all;
  absl::Status s = supervisor_->FollowLogs(l.key, {.attempt = 0}, [&](int attempt, const std::string& piece) {
    absl::StrAppend(&all, attempt, ":", testing::Unstamped(piece));
    return true;
  }, nullptr, absl::Milliseconds(5));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(all, "0:a0\n1:a1\n2:a2\n");
  EXPECT_EQ(supervisor_->WaitFor(l.key, Final, kTimeout)->state, TaskState::kSucceeded);
}

TEST_F(SupervisorTest, FollowLogsStopsWhenAsked) {
  TaskLaunch l = ShellTask("worker", "echo started; exec sleep 30");
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::string all;
  absl::Status s = supervisor_->FollowLogs(
      l.key, {}, [&](int, const std::string& piece) { all += piece; return true; },
      [&] { return testing::Unstamped(all) == "started\n"; }, absl::Milliseconds(5));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(testing::Unstamped(all), "started\n");
  EXPECT_EQ(supervisor_->FollowLogs({.job = "nope", .role = "x"}, {}, [](int, const std::string&) { return true; })
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SupervisorTest, GpusInUseCoversRunningTasks) {
  TaskLaunch l = ShellTask("worker", "exec sleep 30");
  l.gpus = *core::GpuSet::FromIndices({2, 3});
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  EXPECT_EQ(supervisor_->GpusInUse(), l.gpus);
  ASSERT_TRUE(supervisor_->Kill(l.key).ok());
  ASSERT_TRUE(supervisor_->WaitFor(l.key, Final, kTimeout));
  EXPECT_TRUE(supervisor_->GpusInUse().Empty());
}

// Runs in `dir` for its lifetime, as an agent started from there does.
class ScopedWorkingDir {
 public:
  explicit ScopedWorkingDir(const std::string& dir) : previous_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~ScopedWorkingDir() { std::filesystem::current_path(previous_); }

 private:
  std::filesystem::path previous_;
};

TEST(SupervisorDataDirTest, RelativeDataDirIsTakenFromTheDirectoryTheAgentStartedIn) {
  TempDir dir;
  ScopedWorkingDir in_dir(dir.path());
  FakeClock clock;
  RecordingListener listener;
  auto supervisor = Supervisor::Create({.data_dir = "a1", .clock = &clock, .listener = &listener});
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  std::string data_dir = (std::filesystem::canonical(dir.path()) / "a1").string();
  EXPECT_EQ(std::filesystem::canonical((*supervisor)->data_dir()).string(), data_dir);
  // No working_dir: the task runs in DATA/work/JOB/ROLE-INDEX.
  TaskLaunch l{.key = {.job = "rel", .role = "worker"}, .command = {"sh", "-c", "pwd -P > where"}};
  ASSERT_TRUE((*supervisor)->Launch(l).ok());
  std::optional<TaskStatus> s = (*supervisor)->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, TaskState::kSucceeded) << s->message;
  EXPECT_EQ(ReadFileOrEmpty(data_dir + "/work/rel/worker-0/where"), data_dir + "/work/rel/worker-0\n");
  absl::StatusOr<LogChunk> log = (*supervisor)->logs().Read(l.key, {});
  EXPECT_TRUE(log.ok()) << log.status();
}

}  // namespace
}  // namespace trainyard::agent

namespace trainyard::agent {
namespace {

TEST_F(SupervisorTest, FailAttemptStopsAHungAttemptAsAFailureAndItsPolicyRestartsIt) {
  TaskLaunch l = ShellTask("worker", "exec sleep 30");
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 1;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_TRUE(WaitForState(l.key, TaskState::kRunning, 0));
  pid_t pid = supervisor_->Status(l.key)->pid;
  ASSERT_EQ(kill(pid, SIGSTOP), 0);  // hung: a stopped process acts on SIGTERM only once continued
  ASSERT_TRUE(supervisor_->FailAttempt(l.key, 0, "no ping for 5.2s").ok());
  std::optional<TaskStatus> restarting = WaitForState(l.key, TaskState::kRestarting, 0);
  ASSERT_TRUE(restarting);
  EXPECT_NE(restarting->exit.message.find("no ping for 5.2s"), std::string::npos) << restarting->exit.message;
  std::optional<TaskStatus> again = WaitForState(l.key, TaskState::kRunning, 1);
  ASSERT_TRUE(again) << "restarted by its policy";
  EXPECT_EQ(again->restarts, 1);
  ASSERT_TRUE(supervisor_->FailAttempt(l.key, 0, "late").ok());
  EXPECT_EQ(supervisor_->Status(l.key)->state, TaskState::kRunning) << "a report about an earlier attempt is ignored";
}

// As root, a task runs as the account its user maps to, with no_new_privs,
// in its own directory (given to that account); a user with no account is
// refused before anything runs, naming the user.
TEST(SupervisorUsersTest, AsRootATaskRunsAsItsUsersAccountWithNoNewPrivs) {
  if (geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  TempDir dir;
  chmod(dir.path().c_str(), 0711);  // mkdtemp's 0700 would keep the account out
  FakeClock clock;
  RecordingListener listener;
  TaskUsers users({.map = *TaskUserMap::Parse("alice: 65534\n", "test map")});
  auto supervisor =
      Supervisor::Create({.data_dir = dir.path() + "/data", .clock = &clock, .listener = &listener, .users = &users});
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  TaskLaunch l;
  l.key = {.job = absl::StrCat("t", getpid(), "-users"), .role = "w"};
  l.user = "alice";
  l.command = {"sh", "-c", "id -u > out; id -g >> out; grep NoNewPrivs /proc/self/status >> out"};
  ASSERT_TRUE((*supervisor)->Launch(l).ok());
  std::optional<TaskStatus> s = (*supervisor)->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kSucceeded) << s->message;
  EXPECT_EQ(ReadFileOrEmpty(absl::StrCat(dir.path(), "/data/work/", l.key.job, "/w-0/out")),
            "65534\n65534\nNoNewPrivs:\t1\n");

  l.key.role = "m";
  l.user = "mallory";
  absl::Status refused = (*supervisor)->Launch(l);
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_THAT(refused.message(), HasSubstr("user 'mallory': no local account 'mallory'"));
}

}  // namespace
}  // namespace trainyard::agent
