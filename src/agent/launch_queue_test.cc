// LaunchQueue: launches in flight are listed, a kill that overtakes a launch
// drops it or kills it once started, and one task's launches never overlap.
#include "agent/launch_queue.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

v1::TaskSpec Spec(int index, int attempt = 0) {
  v1::TaskSpec s;
  s.set_job("j");
  s.set_job_id(7);
  s.set_role("worker");
  s.set_index(index);
  s.set_attempt(attempt);
  return s;
}

// Holds every start until Release, and records what happened.
struct Recorder {
  absl::Mutex mu;
  bool released ABSL_GUARDED_BY(mu) = false;
  int running ABSL_GUARDED_BY(mu) = 0;
  int most_of_one_task ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::string> events ABSL_GUARDED_BY(mu);

  void Start(const v1::TaskSpec& s) {
    absl::MutexLock lock(&mu);
    ++running;
    events.push_back("start " + std::to_string(s.index()) + "." + std::to_string(s.attempt()));
    mu.Await(absl::Condition(&released));
    --running;
  }
  void Cancelled(const v1::TaskSpec& s, bool started) {
    absl::MutexLock lock(&mu);
    events.push_back(std::string(started ? "kill " : "drop ") + std::to_string(s.index()));
  }
  void Release() {
    absl::MutexLock lock(&mu);
    released = true;
  }
  std::vector<std::string> Events() {
    absl::MutexLock lock(&mu);
    return events;
  }
  int Running() {
    absl::MutexLock lock(&mu);
    return running;
  }
};

TEST(LaunchQueueTest, ListsEveryLaunchInFlightAndDropsOrKillsWhatAKillOvertook) {
  Recorder r;
  LaunchQueue q(
      1, [&r](const v1::TaskSpec& s) { r.Start(s); },
      [&r](const v1::TaskSpec& s, bool started) { r.Cancelled(s, started); });
  q.Push(Spec(0));
  q.Push(Spec(1));
  std::vector<TaskStatus> flying = q.InFlight();
  ASSERT_EQ(flying.size(), 2u);
  EXPECT_EQ(flying[1].key.index, 1);
  EXPECT_EQ(flying[1].key.job_id, 7u);
  EXPECT_EQ(flying[1].state, TaskState::kLaunching);
  // The one worker holds task 0; task 1 waits in the queue.
  ASSERT_TRUE(WaitUntil([&r] { return r.Running() > 0; }));
  EXPECT_TRUE(q.Cancel(TaskKey{"j", "worker", 1, 7}));  // queued: dropped
  EXPECT_TRUE(q.Cancel(TaskKey{"j", "worker", 0, 7}));  // being started: killed once in
  EXPECT_FALSE(q.Cancel(TaskKey{"j", "worker", 5, 7}));  // not here: the supervisor's
  r.Release();
  q.WaitIdleForTest();
  EXPECT_EQ(r.Events(), (std::vector<std::string>{"start 0.0", "drop 1", "kill 0"}));
  EXPECT_TRUE(q.InFlight().empty());
}

TEST(LaunchQueueTest, StartsDifferentTasksAtOnceButOneTasksLaunchesInOrder) {
  Recorder r;
  LaunchQueue q(
      4, [&r](const v1::TaskSpec& s) { r.Start(s); },
      [&r](const v1::TaskSpec& s, bool started) { r.Cancelled(s, started); });
  q.Push(Spec(0, 0));
  q.Push(Spec(0, 1));  // the same task again: waits for the first
  q.Push(Spec(1, 0));
  ASSERT_TRUE(WaitUntil([&r] { return r.Running() >= 2; }));
  EXPECT_EQ(r.Running(), 2);  // tasks 0 and 1, not 0's second launch
  r.Release();
  q.WaitIdleForTest();
  std::vector<std::string> events = r.Events();
  auto at = [&events](const std::string& e) { return std::find(events.begin(), events.end(), e) - events.begin(); };
  ASSERT_EQ(events.size(), 3u);
  EXPECT_LT(at("start 0.0"), at("start 0.1"));
}

// A task's files updated while its launch writes them (the server moved a
// peer): the update runs after the launch, before the task's next launch,
// and at once when nothing of the task is in flight.
TEST(LaunchQueueTest, WhatFollowsALaunchRunsAfterItAndBeforeTheTasksNextLaunch) {
  Recorder r;
  LaunchQueue q(
      4, [&r](const v1::TaskSpec& s) { r.Start(s); },
      [&r](const v1::TaskSpec& s, bool started) { r.Cancelled(s, started); });
  auto note = [&r](std::string e) {
    return [&r, e] {
      absl::MutexLock lock(&r.mu);
      r.events.push_back(e);
    };
  };
  q.Push(Spec(0, 0));
  ASSERT_TRUE(WaitUntil([&r] { return r.Running() > 0; }));
  EXPECT_TRUE(q.AfterLaunch(TaskKey{"j", "worker", 0, 7}, note("files 0.a")));
  q.Push(Spec(0, 1));
  EXPECT_TRUE(q.AfterLaunch(TaskKey{"j", "worker", 0, 7}, note("files 0.b")));  // after the second launch
  EXPECT_FALSE(q.AfterLaunch(TaskKey{"j", "worker", 3, 7}, note("files 3")));   // nothing in flight: the caller's
  r.Release();
  q.WaitIdleForTest();
  EXPECT_EQ(r.Events(), (std::vector<std::string>{"start 0.0", "files 0.a", "start 0.1", "files 0.b"}));
}

}  // namespace
}  // namespace trainyard::agent
