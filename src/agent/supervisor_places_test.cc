// A task's places on the node with real processes: logs, work dirs and
// records are named by the job's id, so a new job of a reused name never
// sees the old one's; finished tasks' work dirs go after the retention
// (on a FakeClock) while their logs stay readable.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/supervisor.h"
#include "agent/task_record.h"
#include "agent/test_util.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::RecordingListener;
using testing::TempDir;
using testing::Unstamped;
using testing::WaitUntil;
using testing::kTimeout;
using testing::Final;

class SupervisorPlacesTest : public ::testing::Test {
 protected:
  void Start(absl::Duration retention) {
    auto supervisor = Supervisor::Create({.data_dir = dir_.path() + "/data",
                                          .clock = &clock_,
                                          .listener = &listener_,
                                          .task_dir_retention = retention});
    ASSERT_TRUE(supervisor.ok()) << supervisor.status();
    supervisor_ = *std::move(supervisor);
  }
  void TearDown() override {
    if (!supervisor_) return;
    supervisor_->KillAll();
    for (const TaskStatus& s : supervisor_->Snapshot()) supervisor_->WaitFor(s.key, Final, kTimeout);
    supervisor_.reset();
  }

  // A task of job `job_id` named "leak" running `script` in its own work dir.
  TaskLaunch LeakTask(uint64_t job_id, const std::string& script) {
    TaskLaunch l;
    l.key = {.job = "leak", .role = "worker", .index = 0};
    l.job_id = job_id;
    l.command = {"sh", "-c", script};
    return l;
  }

  TaskStatus RunToEnd(const TaskLaunch& l) {
    absl::Status launched = supervisor_->Launch(l);
    EXPECT_TRUE(launched.ok()) << launched;
    TaskKey key = l.key;
    key.job_id = l.job_id;
    std::optional<TaskStatus> s = supervisor_->WaitFor(key, Final, kTimeout);
    EXPECT_TRUE(s.has_value());
    return s.value_or(TaskStatus{});
  }

  std::string Stdout(const TaskKey& key) {
    absl::StatusOr<LogChunk> chunk = supervisor_->logs().Read(key, {});
    return chunk.ok() ? Unstamped(chunk->data) : chunk.status().ToString();
  }

  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(1700000000)};
  RecordingListener listener_;
  std::unique_ptr<Supervisor> supervisor_;
};

TEST_F(SupervisorPlacesTest, ANewJobOfAReusedNameSeesNoneOfTheOldJobsFiles) {
  Start(absl::InfiniteDuration());
  ASSERT_EQ(RunToEnd(LeakTask(1, "echo secret-of-a; echo a > mine")).state, TaskState::kSucceeded);
  // The second job of the name is another job (id 2): its own log, its own
  // work dir (the first's file is not there).
  ASSERT_EQ(RunToEnd(LeakTask(2, "echo b; ls")).state, TaskState::kSucceeded);
  TaskKey a{"leak", "worker", 0, 1}, b{"leak", "worker", 0, 2};
  EXPECT_EQ(Stdout(b), "b\n");
  EXPECT_EQ(Stdout(a), "secret-of-a\n");
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/data/logs/job_1/worker-0"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/data/work/job_2/worker-0"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/data/work/job_2/worker-0/mine"));
}

TEST_F(SupervisorPlacesTest, AFinishedTasksWorkDirGoesAfterTheRetentionAndItsLogsStay) {
  Start(absl::Hours(1));
  TaskLaunch l = LeakTask(7, "echo kept-in-the-log; head -c 100000 /dev/zero > scratch");
  ASSERT_EQ(RunToEnd(l).state, TaskState::kSucceeded);
  std::string work = dir_.path() + "/data/work/job_7/worker-0";
  ASSERT_TRUE(std::filesystem::exists(work + "/scratch"));

  clock_.Advance(absl::Minutes(59));
  // A launch wakes the loop as the clock's jump did; the dir is still due
  // later, so a later task's end is what is waited on here.
  TaskLaunch other = LeakTask(8, "true");
  ASSERT_EQ(RunToEnd(other).state, TaskState::kSucceeded);
  EXPECT_TRUE(std::filesystem::exists(work + "/scratch"));
  EXPECT_EQ(supervisor_->Metrics().task_dirs_reclaimed, 0);

  clock_.Advance(absl::Minutes(2));
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(work); }, kTimeout));
  EXPECT_TRUE(WaitUntil([&] { return supervisor_->Metrics().task_dirs_reclaimed == 1; }, kTimeout));
  EXPECT_GE(supervisor_->Metrics().task_dirs_reclaimed_bytes, 100000);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/data/work/job_8/worker-0"));  // ended a minute later
  EXPECT_EQ(Stdout({"leak", "worker", 0, 7}), "kept-in-the-log\n");
}

TEST_F(SupervisorPlacesTest, ARunningTasksWorkDirIsNeverReclaimed) {
  Start(absl::ZeroDuration());
  TaskLaunch l = LeakTask(9, "touch here; while [ ! -e stop ]; do sleep 0.05; done; echo done");
  ASSERT_TRUE(supervisor_->Launch(l).ok());
  TaskKey key{"leak", "worker", 0, 9};
  std::string work = dir_.path() + "/data/work/job_9/worker-0";
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(work + "/here"); }, kTimeout));
  clock_.Advance(absl::Hours(100));
  // Another task's end at retention 0 runs a reclaim pass.
  ASSERT_EQ(RunToEnd(LeakTask(10, "true")).state, TaskState::kSucceeded);
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(dir_.path() + "/data/work/job_10"); }, kTimeout));
  EXPECT_TRUE(std::filesystem::exists(work + "/here"));
  std::ofstream(work + "/stop") << "";
  std::optional<TaskStatus> s = supervisor_->WaitFor(key, Final, kTimeout);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, TaskState::kSucceeded);
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(work); }, kTimeout));
  EXPECT_EQ(Stdout(key), "done\n");
}

TEST_F(SupervisorPlacesTest, ATaskRecordedByAnAgentBeforeIdsIsFoundByItsId) {
  // A record as an agent from before places were named by id left it: at
  // tasks/leak/worker-0.json, its key without the id. The adopted task keeps
  // its places by name, and the server, which asks by id, finds it.
  Start(absl::InfiniteDuration());
  TaskRecord r{.launch = LeakTask(5, "true"), .attempt = 0, .pid = 0};
  r.launch.working_dir = dir_.path();
  ASSERT_TRUE(WriteTaskRecord(dir_.path() + "/data", r).ok());
  std::string path = TaskRecordPath(dir_.path() + "/data", r.launch.key);
  EXPECT_THAT(path, HasSubstr("/tasks/leak/worker-0.json"));
  supervisor_->Adopt();
  TaskKey by_id{"leak", "worker", 0, 5};
  TaskKey held = supervisor_->Holding(by_id);
  EXPECT_EQ(held.job_id, 0u);
  EXPECT_TRUE(supervisor_->WaitFor(held, Final, kTimeout).has_value());
  EXPECT_EQ(supervisor_->Holding(TaskKey{"leak", "worker", 0, 6}).job_id, 6u);  // another job's id: not this task
}

}  // namespace
}  // namespace trainyard::agent
