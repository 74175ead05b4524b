// Jobs' time limits through ControlState, with explicit time: a job past its
// activeDeadline ends DEADLINE_EXCEEDED and its tasks are stopped; the
// limit counts from the job's start, survives a server restart, and comes
// from the queue (its default, refused above its maximum) when the spec
// asks none. No threads, no sockets, no clock.
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "api/states.h"
#include "api/time_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"
#include "server/control/test_restart.h"
#include "server/control/test_status.h"
#include "store/memory_state_store.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

constexpr char kTenSeconds[] = R"(
name: timed
activeDeadline: 10s
replicas:
  worker:
    count: 2
    resources: {gpus: 1}
    command: [train]
)";

class ControlDeadlinesTest : public ::testing::Test {
 protected:
  void SetUp() {
    config_.kill_grace_ms = 3000;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 86'400'000;  // rounds hours apart without heartbeats: liveness is not tested here
    core::QueuesConfig queues;
    queues.root.children.push_back({.name = "research", .capacity_percent = 50, .max_time = absl::Hours(24),
                                    .default_time = absl::Hours(2)});
    queues.root.children.push_back({.name = "open", .capacity_percent = 50});
    options_.queues = queues;
    state_ = Make();
    state_->Recover(StoreSnapshot{}, {}, now_);
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 1, now_).ok());
  }

  std::unique_ptr<ControlState> Make() {
    auto sched = core::Scheduler::Create(options_);
    EXPECT_TRUE(sched.ok()) << sched.status();
    return std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  }

  // Submits `yaml` to `queue` and keeps the job in the store, as the shell
  // does before it acknowledges; returns its name or the refusal.
  absl::StatusOr<std::string> Submit(const std::string& yaml, const std::string& queue = "open") {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    if (!spec.ok()) return spec.status();
    spec->set_queue(queue);
    absl::StatusOr<PreparedJob> prepared = state_->PrepareSubmit(*spec, now_);
    if (!prepared.ok()) return prepared.status();
    WriteBatch create;
    create.CreateJob(prepared->rec, prepared->first_event);
    if (absl::Status kept = store_.Commit(std::move(create)); !kept.ok()) return kept;
    absl::StatusOr<v1::SubmitResponse> resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    if (!resp.ok()) return resp.status();
    return resp->job();
  }

  // Writes what the control state has for the store, as the shell does.
  void Flush() { testing::FlushWrites(*state_, store_); }

  // The server restarts: a new control state from what the store holds.
  void Restart() {
    Flush();
    state_ = Make();
    testing::RecoverFromStore(store_, *state_, now_);
  }

  // The agent on n1 reports every task it was sent from `first` on as `s`.
  void Report(v1::TaskState s, size_t first = 0) {
    for (size_t k = first; k < backend_.launches.size(); ++k) {
      state_->OnTaskStatus(backend_.launches[k].first, testing::StatusOf(backend_.launches[k].second, s), now_);
    }
  }

  v1::JobView View(const std::string& job) {
    auto v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  // A round `d` after the last one.
  void RoundAfter(absl::Duration d) {
    now_ += d;
    state_->RunRound(now_);
  }

  ServerConfig config_;
  core::SchedulerOptions options_;
  testing::RecordingBackend backend_;
  MemoryStateStore store_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlDeadlinesTest, AJobPastItsLimitEndsDeadlineExceededAndItsTasksAreStoppedWithTheGrace) {
  absl::StatusOr<std::string> job = Submit(kTenSeconds);
  ASSERT_TRUE(job.ok()) << job.status();
  RoundAfter(absl::ZeroDuration());
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(api::TimeLimitLine(View(*job), absl::ToUnixMillis(now_)), "10s (counted from when the job starts running)");
  RoundAfter(absl::Seconds(30));  // launching is not running: no time is counted yet
  Report(v1::TASK_RUNNING);
  absl::Time started = now_;
  ASSERT_EQ(View(*job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(View(*job).deadline_unix_ms(), absl::ToUnixMillis(started + absl::Seconds(10)));

  RoundAfter(absl::Milliseconds(9900));
  EXPECT_EQ(View(*job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(api::TimeLimitLine(View(*job), absl::ToUnixMillis(now_)), "10s (under 1s left)");
  EXPECT_TRUE(backend_.kills.empty());

  RoundAfter(absl::Milliseconds(100));
  v1::JobView v = View(*job);
  EXPECT_EQ(v.state(), v1::JOB_DEADLINE_EXCEEDED);
  EXPECT_EQ(v.reason(), "ran past its activeDeadline of 10s (started at 2027-01-15T08:00:30Z)");
  EXPECT_EQ(api::TimeLimitLine(v, absl::ToUnixMillis(now_)), "10s (exceeded)");
  ASSERT_EQ(backend_.kills.size(), 2u) << "each running task is told to stop";
  for (const auto& [node, kill] : backend_.kills) {
    EXPECT_EQ(kill.grace_ms(), 3000) << "SIGTERM, then the kill grace to save its work";
    EXPECT_THAT(kill.reason(), HasSubstr("activeDeadline"));
  }
  Report(v1::TASK_KILLED);
  v = View(*job);
  EXPECT_EQ(v.state(), v1::JOB_DEADLINE_EXCEEDED) << "the tasks' stop does not change how it ended";
  for (const auto& t : v.tasks()) EXPECT_EQ(t.state(), v1::TASK_KILLED);
  EXPECT_THAT(v.events(v.events_size() - 1).text(), HasSubstr("DEADLINE_EXCEEDED: ran past its activeDeadline"));
  EXPECT_TRUE(state_->CheckInvariantsForTest().ok()) << state_->CheckInvariantsForTest();

  // Its GPUs are free again: the same job fits at once.
  size_t before = backend_.launches.size();
  ASSERT_TRUE(Submit(kTenSeconds).ok());
  RoundAfter(absl::Seconds(1));
  EXPECT_EQ(backend_.launches.size(), before + 2);
}

TEST_F(ControlDeadlinesTest, AJobWithoutALimitGetsItsQueuesDefaultAndOneWithoutEitherRunsOn) {
  absl::StatusOr<std::string> defaulted = Submit("name: d\nreplicas:\n  worker: {command: [x]}\n", "research");
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  v1::JobView v = View(*defaulted);
  EXPECT_EQ(v.active_deadline_ms(), 2 * 3600 * 1000);
  EXPECT_THAT(v.events(0).text(), HasSubstr("activeDeadline 2h (queue research's defaultTime)"));
  absl::StatusOr<std::string> asked = Submit("name: a\nactiveDeadline: 30m\nreplicas:\n  worker: {command: [x]}\n",
                                             "research");
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(View(*asked).active_deadline_ms(), 30 * 60 * 1000) << "what the spec asks is kept";
  absl::StatusOr<std::string> open = Submit("name: o\nreplicas:\n  worker: {command: [x]}\n", "open");
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(View(*open).active_deadline_ms(), 0);

  RoundAfter(absl::ZeroDuration());
  Report(v1::TASK_RUNNING);
  RoundAfter(absl::Minutes(31));
  EXPECT_EQ(View(*asked).state(), v1::JOB_DEADLINE_EXCEEDED);
  EXPECT_EQ(View(*defaulted).state(), v1::JOB_RUNNING);
  EXPECT_EQ(api::TimeLimitLine(View(*defaulted), absl::ToUnixMillis(now_)), "2h (1h29m left)");
  RoundAfter(absl::Hours(2));
  EXPECT_EQ(View(*defaulted).state(), v1::JOB_DEADLINE_EXCEEDED);
  EXPECT_EQ(View(*open).state(), v1::JOB_RUNNING) << "no limit in the spec or its queue";
  EXPECT_EQ(api::TimeLimitLine(View(*open), absl::ToUnixMillis(now_)), "none");
}

TEST_F(ControlDeadlinesTest, ALimitAboveTheQueuesMaximumIsRefusedNamingTheFieldAndTheLimit) {
  absl::StatusOr<std::string> job =
      Submit("name: long\nactiveDeadline: 48h\nreplicas:\n  worker: {command: [x]}\n", "research");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(),
            "activeDeadline: 48h is above the maximum of queue research, 24h (maxTime in the queue config)");
  EXPECT_FALSE(state_->Describe("long").ok()) << "nothing was taken in";
  EXPECT_TRUE(Submit("name: long\nactiveDeadline: 24h\nreplicas:\n  worker: {command: [x]}\n", "research").ok())
      << "the maximum itself is allowed";
}

TEST_F(ControlDeadlinesTest, TheDeadlineSurvivesAServerRestartFromTheRecordedStart) {
  absl::StatusOr<std::string> job = Submit(kTenSeconds);
  ASSERT_TRUE(job.ok()) << job.status();
  RoundAfter(absl::ZeroDuration());
  Report(v1::TASK_RUNNING);
  absl::Time started = now_;
  now_ += absl::Seconds(6);
  Restart();
  v1::JobView v = View(*job);
  EXPECT_EQ(v.state(), v1::JOB_RUNNING);
  EXPECT_EQ(v.deadline_unix_ms(), absl::ToUnixMillis(started + absl::Seconds(10))) << "not counted again from the restart";
  EXPECT_EQ(api::TimeLimitLine(v, absl::ToUnixMillis(now_)), "10s (4s left)");
  RoundAfter(absl::Seconds(3));
  EXPECT_EQ(View(*job).state(), v1::JOB_RUNNING);
  RoundAfter(absl::Seconds(1));
  EXPECT_EQ(View(*job).state(), v1::JOB_DEADLINE_EXCEEDED);

  // Ended while its tasks stop, then a restart: it stays as it ended.
  Restart();
  EXPECT_EQ(View(*job).state(), v1::JOB_DEADLINE_EXCEEDED);
  RoundAfter(absl::Hours(1));
  EXPECT_EQ(View(*job).state(), v1::JOB_DEADLINE_EXCEEDED);
}

TEST_F(ControlDeadlinesTest, AJobRequeuedAfterItStartedKeepsItsClockAndIsEndedWhileItWaits) {
  absl::StatusOr<std::string> job = Submit(kTenSeconds);
  ASSERT_TRUE(job.ok()) << job.status();
  RoundAfter(absl::ZeroDuration());
  Report(v1::TASK_RUNNING);
  // Its node's agent stops on purpose: the job goes back to the queue, and
  // no node is left to run it again.
  state_->AgentDraining("n1", "maintenance", now_);
  Report(v1::TASK_KILLED);
  RoundAfter(absl::Seconds(1));
  ASSERT_EQ(View(*job).state(), v1::JOB_QUEUED);
  RoundAfter(absl::Seconds(9));
  v1::JobView v = View(*job);
  EXPECT_EQ(v.state(), v1::JOB_DEADLINE_EXCEEDED) << "wall-clock time since it first ran, as it waited";
  for (const auto& t : v.tasks()) EXPECT_TRUE(api::IsTerminal(t.state())) << t.name();
  EXPECT_TRUE(state_->CheckInvariantsForTest().ok()) << state_->CheckInvariantsForTest();
}

}  // namespace
}  // namespace trainyard::server
