// Supervisor tests of memory / CPU limits (a real OOM kill under a cgroup
// memory limit where this machine lets us create cgroups; programs that
// reserve far more address space than their limit, with cgroups and
// without) and of re-adopting tasks after an agent restart.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/server_link.h"
#include "agent/supervisor.h"
#include "agent/task_record.h"
#include "agent/test_util.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::RecordingListener;
using testing::TempDir;
using testing::WaitUntil;
using testing::kTimeout;
using testing::Final;

bool Running(const TaskStatus& s) { return s.state == TaskState::kRunning; }

TaskLaunch ShellTask(const TempDir& dir, const std::string& role, const std::string& script) {
  TaskLaunch l;
  l.key = {.job = absl::StrCat("t", getpid(), "-", ::testing::UnitTest::GetInstance()->current_test_info()->name()),
           .role = role};
  l.command = {"sh", "-c", script};
  l.working_dir = absl::StrCat(dir.path(), "/", role);
  std::filesystem::create_directories(l.working_dir);
  return l;
}

class LimitsTest : public ::testing::Test {
 protected:
  void Start(ResourceLimiter* limiter) {
    auto s = Supervisor::Create(
        {.data_dir = dir_.path() + "/data", .clock = &clock_, .limiter = limiter, .listener = &listener_});
    ASSERT_TRUE(s.ok()) << s.status();
    supervisor_ = *std::move(s);
  }
  void TearDown() override {
    if (!supervisor_) return;
    supervisor_->KillAll();
    for (const TaskStatus& s : supervisor_->Snapshot()) supervisor_->WaitFor(s.key, Final, kTimeout);
  }
  bool HaveCgroups() { return detected_->kind() != LimiterKind::kNone; }

  TempDir dir_;
  FakeClock clock_;  // nothing here waits on a restart delay or a kill grace
  RecordingListener listener_;
  ResourceLimiterPtr detected_ = DetectResourceLimiter();
  ResourceLimiterPtr none_ = NewUnconfinedLimiter();  // outlives supervisor_, which reads it
  std::unique_ptr<Supervisor> supervisor_;
};

TEST_F(LimitsTest, MemoryLimitOomKillIsReported) {
  if (!HaveCgroups()) GTEST_SKIP() << "cgroups are not writable here (not root?)";
  Start(detected_.get());
  // `tail` keeps a newline-free stream in memory: it grows past 64 MiB.
  TaskLaunch l = ShellTask(dir_, "worker", "head -c 400000000 /dev/zero | tail > /dev/null");
  l.memory_limit_mb = 64;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kFailed);
  EXPECT_TRUE(s->exit.oom_killed);
  EXPECT_THAT(s->message, HasSubstr("OOM-killed by the kernel"));
}

// The class the server is told (TaskStatus.attempt_class), and the OOM
// budget apart from maxRestarts: one OOM restart, then the end.
TEST_F(LimitsTest, AnOomKillIsClassedOomKilledAndSpendsTheOomBudget) {
  if (!HaveCgroups()) GTEST_SKIP() << "cgroups are not writable here (not root?)";
  Start(detected_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "head -c 400000000 /dev/zero | tail > /dev/null");
  l.memory_limit_mb = 64;
  l.restart_policy = RestartPolicy::kOnFailure;
  l.max_restarts = 5;  // program failures: not spent by OOM kills
  l.oom_max_restarts = 1;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> restarting = supervisor_->WaitFor(
      l.key, [](const TaskStatus& s) { return s.state == TaskState::kRestarting || IsFinal(s.state); }, kTimeout);
  ASSERT_TRUE(restarting.has_value());
  ASSERT_EQ(restarting->state, TaskState::kRestarting) << restarting->message;
  EXPECT_THAT(restarting->message, HasSubstr("OOM restart 1 of 1"));
  v1::TaskStatus wire = ToProto(*restarting, absl::Now());
  EXPECT_EQ(wire.state(), v1::TASK_RESTARTING);
  EXPECT_EQ(wire.attempt_class(), v1::ATTEMPT_OOM_KILLED);
  clock_.Advance(absl::Minutes(1));  // past the restart's backoff
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kFailed);
  EXPECT_THAT(s->message, HasSubstr("OOM restarts 1 exhausted after 2 attempts"));
  EXPECT_EQ(ToProto(*s, absl::Now()).attempt_class(), v1::ATTEMPT_OOM_KILLED);
}

TEST_F(LimitsTest, AProgramsOwnExitIsClassedFailed) {
  Start(none_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "exit 3");
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  v1::TaskStatus wire = ToProto(*s, absl::Now());
  EXPECT_EQ(wire.attempt_class(), v1::ATTEMPT_FAILED);
  EXPECT_EQ(wire.exit().exit_code(), 3);
}

TEST_F(LimitsTest, TaskWithoutOomIsNotReportedOom) {
  if (!HaveCgroups()) GTEST_SKIP() << "cgroups are not writable here (not root?)";
  Start(detected_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "exit 2");
  l.memory_limit_mb = 64;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  EXPECT_EQ(s->exit.exit_code, 2);
  EXPECT_FALSE(s->exit.oom_killed);
}

TEST_F(LimitsTest, TaskRunsInsideItsOwnCgroups) {
  if (!HaveCgroups()) GTEST_SKIP() << "cgroups are not writable here (not root?)";
  Start(detected_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "cat /proc/self/cgroup > cgroup");
  l.memory_limit_mb = 128;
  l.vcores_milli = 500;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_EQ(supervisor_->WaitFor(l.key, Final, kTimeout)->state, TaskState::kSucceeded);
  std::string name = CgroupSafeName(absl::StrCat(l.key.job, ".", l.job_id, "_worker-0_a0"));
  std::string cgroups = ReadFileOrEmpty(l.working_dir + "/cgroup");
  for (absl::string_view line : absl::StrSplit(cgroups, '\n')) {
    bool limited = absl::StrContains(line, ":memory:") || absl::StrContains(line, ":cpu,") ||
                   absl::StrContains(line, ":cpu:") || absl::StartsWith(line, "0::");
    if (!limited || (detected_->kind() == LimiterKind::kCgroupV1 && absl::StartsWith(line, "0::"))) continue;
    // trainyard/<agent's hash>_<job>.<job id>_worker-0_a0
    EXPECT_THAT(std::string(line), HasSubstr("/trainyard/")) << cgroups;
    EXPECT_THAT(std::string(line), HasSubstr("_" + name)) << cgroups;
  }
}

// Not a test of its own: the program that the tests below run as a task (this
// binary again, with this one test enabled). It reserves 8 GiB of address
// space and touches 1 MiB, as job masters, JVMs, CUDA and Go runtimes map far
// more than they use, and leaves a file saying it did.
TEST(AddressSpaceProgram, DISABLED_ReservesEightGiB) {
  void* p = mmap(nullptr, 8ull << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  std::vector<char> touched(1 << 20, 1);
  std::ofstream("reserved") << "8 GiB reserved, " << touched.size() << " bytes touched\n";
}

TaskLaunch ReservingTask(const TempDir& dir) {
  TaskLaunch l = ShellTask(dir, "worker", "");
  std::error_code ec;
  l.command = {std::filesystem::read_symlink("/proc/self/exe", ec).string(), "--gtest_also_run_disabled_tests",
               "--gtest_filter=AddressSpaceProgram.DISABLED_ReservesEightGiB"};
  l.memory_limit_mb = 256;
  return l;
}

// Before, an agent without cgroups set RLIMIT_AS to the memory limit, and a
// program that reserves more address space than that (8 GiB here against
// 256 MiB) could not start or failed at its first large mapping.
TEST_F(LimitsTest, ProgramReservingFarMoreThanItsLimitRunsUnconfined) {
  none_ = NewUnconfinedLimiter("no writable cgroup (a test)");
  Start(none_.get());
  TaskLaunch l = ReservingTask(dir_);
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kSucceeded) << s->message;
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/reserved"), "8 GiB reserved, 1048576 bytes touched\n");
  // Its status says the limit is not enforced, and why.
  EXPECT_EQ(s->limits.memory_mb, 256);
  EXPECT_EQ(s->limits.memory_by, "");
  EXPECT_EQ(s->limits.why_not, "no writable cgroup (a test)");
}

TEST_F(LimitsTest, ProgramReservingFarMoreThanItsLimitRunsUnderCgroups) {
  if (!HaveCgroups()) GTEST_SKIP() << "cgroups are not writable here (not root?)";
  Start(detected_.get());
  TaskLaunch l = ReservingTask(dir_);
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kSucceeded) << s->message;
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/reserved"), "8 GiB reserved, 1048576 bytes touched\n");
  EXPECT_THAT(s->limits.memory_by, ::testing::StartsWith("cgroup v"));
}

TEST_F(LimitsTest, UnconfinedTaskHasNoAddressSpaceLimit) {
  Start(none_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "ulimit -v > limit");
  l.memory_limit_mb = 256;
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_EQ(supervisor_->WaitFor(l.key, Final, kTimeout)->state, TaskState::kSucceeded);
  EXPECT_EQ(ReadFileOrEmpty(l.working_dir + "/limit"), "unlimited\n");
}

TEST_F(LimitsTest, RestartedAgentReadoptsRunningTask) {
  Start(none_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "exec sleep 30");
  l.gpus = core::GpuSet(0b110);
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  std::optional<TaskStatus> first = supervisor_->WaitFor(l.key, Running, kTimeout);
  ASSERT_TRUE(first.has_value());
  supervisor_.reset();  // the agent goes away; its task keeps running
  ASSERT_EQ(kill(first->pid, 0), 0);

  Start(none_.get());
  std::vector<TaskStatus> adopted = supervisor_->Adopt();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].pid, first->pid);
  EXPECT_EQ(adopted[0].state, TaskState::kRunning);
  EXPECT_EQ(supervisor_->GpusInUse(), l.gpus);
  ASSERT_TRUE(supervisor_->Kill(l.key).ok());
  std::optional<TaskStatus> end = supervisor_->WaitFor(l.key, Final, kTimeout);
  EXPECT_EQ(end->state, TaskState::kKilled);
  EXPECT_TRUE(WaitUntil([&] { return kill(first->pid, 0) != 0; }));
}

TEST_F(LimitsTest, TaskThatEndedWhileAgentWasDownIsReported) {
  std::string data = dir_.path() + "/data";
  TaskLaunch l = ShellTask(dir_, "worker", "true");
  // A record whose pid is no longer that task (start time differs), and
  // the wait status its keeper recorded: exit code 5.
  ASSERT_TRUE(WriteTaskRecord(data, {.launch = l, .pid = getpid(), .start_time = 1}).ok());
  std::string task_logs = data + "/logs/" + l.key.job + "/worker-0";
  std::filesystem::create_directories(task_logs);
  std::ofstream(task_logs + "/attempt-0.wait") << (5 << 8) << "\n";
  Start(none_.get());
  EXPECT_TRUE(supervisor_->Adopt().empty());
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kFailed);
  EXPECT_EQ(s->exit.exit_code, 5);
  EXPECT_THAT(s->message, HasSubstr("exited with code 5"));
  EXPECT_TRUE(ReadTaskRecords(data).empty());
}

TEST_F(LimitsTest, TaskWhoseRecordAndStatusAreGoneEndsUnknown) {
  std::string data = dir_.path() + "/data";
  TaskLaunch l = ShellTask(dir_, "worker", "true");
  ASSERT_TRUE(WriteTaskRecord(data, {.launch = l, .pid = getpid(), .start_time = 1}).ok());
  Start(none_.get());
  supervisor_->Adopt();
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->exit.exit_code, -1);
  EXPECT_THAT(s->message, HasSubstr("ended while the agent was down; exit code unknown"));
}

TEST_F(LimitsTest, ExitWhileAgentIsDownIsReportedWithItsCode) {
  Start(none_.get());
  TaskLaunch l = ShellTask(dir_, "worker", "while [ ! -e go ]; do sleep 0.01; done; exit 7");
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  ASSERT_TRUE(supervisor_->WaitFor(l.key, Running, kTimeout).has_value());
  supervisor_.reset();  // the agent is down while the task ends
  std::ofstream(l.working_dir + "/go");
  std::string wait_file = dir_.path() + "/data/logs/" + l.key.job + "/worker-0/attempt-0.wait";
  ASSERT_TRUE(WaitUntil([&] { return !ReadFileOrEmpty(wait_file).empty(); }));
  EXPECT_EQ(ReadFileOrEmpty(wait_file), absl::StrCat(7 << 8, "\n"));

  Start(none_.get());
  supervisor_->Adopt();
  std::optional<TaskStatus> s = supervisor_->WaitFor(l.key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kFailed);
  EXPECT_EQ(s->exit.exit_code, 7);
}

}  // namespace
}  // namespace trainyard::agent
