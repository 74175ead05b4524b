// Accounting in ControlState: a task's held time (from its placement until
// it lets its place go) is charged to its job over every attempt, and a
// finished job's account is published with its view and kept after the
// job is deleted. Explicit time, a recording backend.
#include <map>
#include <variant>

#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"
#include "server/view_store.h"

namespace trainyard::server {
namespace {

constexpr char kJob[] = "name: train\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 4, "
                        "cpu: 2, memory: 1Gi}\n    command: [train]\n";
constexpr char kHigh[] = "name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                         "    command: [train]\n";
constexpr int64_t kHourMs = 3600 * 1000;

class ControlAccountingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 20 * 24 * kHourMs;  // the node stays while the test's clock jumps days
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 1, now_).ok());
  }

  std::string Submit(const std::string& yaml) {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return "";
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    auto resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    return resp.ok() ? resp->job() : "";
  }

  // Reports every task of `job` launched so far (its latest launch) in state s.
  void ReportAll(const std::string& job, v1::TaskState s) {
    std::map<std::string, std::pair<std::string, v1::TaskSpec>> latest;
    for (const auto& [node, t] : backend_.launches) {
      if (t.job() == job) latest[t.role() + std::to_string(t.index())] = {node, t};
    }
    for (const auto& [key, launch] : latest) {
      v1::TaskStatus st;
      st.set_job(launch.second.job());
      st.set_role(launch.second.role());
      st.set_index(launch.second.index());
      st.set_attempt(launch.second.attempt());
      st.set_state(s);
      if (s == v1::TASK_FAILED) st.mutable_exit()->set_exit_code(3);
      state_->OnTaskStatus(launch.first, st, now_);
    }
  }

  // The job's account as `trainyard history` reads it.
  std::optional<v1::JobAccount> Account(const std::string& name) {
    state_->PublishJobs(&views_);
    v1::HistoryRequest req;
    req.set_name(name);
    absl::StatusOr<v1::HistoryResponse> h = views_.accounts().History(req, now_);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok() || h->jobs_size() == 0) return std::nullopt;
    EXPECT_EQ(h->jobs_size(), 1);
    return h->jobs(0);
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  ViewStore views_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlAccountingTest, AFinishedJobIsChargedForWhatItsTasksHeldFromPlacementToTheirEnd) {
  std::string job = Submit(kJob);
  now_ += absl::Minutes(5);  // waits five minutes (no node yet takes it: it is placed at the round)
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u);
  now_ += absl::Seconds(10);  // launching: held already
  ReportAll(job, v1::TASK_RUNNING);
  EXPECT_FALSE(Account(job)) << "a running job has no account yet";
  now_ += absl::Hours(1);
  ReportAll(job, v1::TASK_SUCCEEDED);

  std::optional<v1::JobAccount> a = Account(job);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(a->tasks(), 2);
  EXPECT_DOUBLE_EQ(a->gpus(), 8.0);
  // 2 tasks x 4 GPUs x (10 s launching + 1 h running).
  EXPECT_NEAR(a->gpu_hours(), 8.0 * (3600 + 10) / 3600.0, 1e-9);
  EXPECT_NEAR(a->cpu_hours(), 4.0 * (3600 + 10) / 3600.0, 1e-9);
  EXPECT_NEAR(a->memory_gb_hours(), 2.0 * (3600 + 10) / 3600.0, 1e-9);
  EXPECT_EQ(a->wait_ms(), 5 * 60 * 1000 + 10 * 1000) << "submitted to running";
  EXPECT_EQ(a->elapsed_ms(), kHourMs);
  EXPECT_EQ(a->attempts(), 2);
  EXPECT_TRUE(a->settled());
  EXPECT_EQ(a->exit_code(), 0);
}

TEST_F(ControlAccountingTest, APreemptedJobIsChargedForEveryRunAndAKilledOneUntilItsTasksStop) {
  std::string job = Submit(kJob);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  now_ += absl::Hours(1);
  Submit(kHigh);
  state_->RunRound(now_);  // preempts `train`: its tasks are told to stop
  now_ += absl::Seconds(30);
  ReportAll(job, v1::TASK_KILLED);  // stopped: requeued, nothing held
  state_->RunRound(now_);
  EXPECT_EQ(state_->Describe(job)->state(), v1::JOB_QUEUED);

  now_ += absl::Hours(5);  // waiting holds nothing
  ASSERT_TRUE(state_->Kill("high", "", now_).ok());
  ReportAll("high", v1::TASK_KILLED);
  state_->RunRound(now_);  // `train` runs again
  ReportAll(job, v1::TASK_RUNNING);
  now_ += absl::Hours(2);
  ASSERT_TRUE(state_->Kill(job, "", now_).ok());
  std::optional<v1::JobAccount> stopping = Account(job);
  ASSERT_TRUE(stopping);
  EXPECT_EQ(stopping->state(), v1::JOB_KILLED);
  EXPECT_FALSE(stopping->settled()) << "its tasks still hold their places";
  EXPECT_NEAR(stopping->gpu_hours(), 8.0 * (3600 + 30) / 3600.0, 1e-9) << "the first run only, so far";

  now_ += absl::Seconds(20);
  ReportAll(job, v1::TASK_KILLED);
  std::optional<v1::JobAccount> a = Account(job);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->settled());
  EXPECT_NEAR(a->gpu_hours(), 8.0 * (3600 + 30 + 7200 + 20) / 3600.0, 1e-9) << "both runs, not the wait";
  EXPECT_EQ(a->attempts(), 4) << "two tasks, two runs each";
  int preempted = 0;
  for (const auto& c : a->attempt_classes()) {
    if (c.attempt_class() == v1::ATTEMPT_PREEMPTED) preempted = c.count();
  }
  EXPECT_EQ(preempted, 2);
}

TEST_F(ControlAccountingTest, ADeletedJobKeepsItsAccountUnderItsOwnName) {
  std::string job = Submit(kJob);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  now_ += absl::Minutes(30);
  ReportAll(job, v1::TASK_FAILED);
  ASSERT_TRUE(state_->DeleteJob(job, now_).ok());
  state_->ReleaseName(job);
  std::optional<v1::JobAccount> a = Account(job);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name(), job);
  EXPECT_TRUE(a->deleted());
  EXPECT_EQ(a->state(), v1::JOB_FAILED);
  EXPECT_EQ(a->exit_code(), 3);
  EXPECT_EQ(a->exit_task(), job + "-worker-0");
  EXPECT_NEAR(a->gpu_hours(), 4.0, 1e-9);
  EXPECT_FALSE(state_->Describe(job).ok()) << "gone from the live views";
}

TEST_F(ControlAccountingTest, AFinishedJobLeavesTheLiveViewsAfterTheRetentionAndHistoryKeepsIt) {
  std::string job = Submit(kJob);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  now_ += absl::Hours(1);
  ReportAll(job, v1::TASK_SUCCEEDED);
  now_ += absl::Hours(24 * 7) - absl::Minutes(2);  // a week is the default
  state_->RunRound(now_);
  EXPECT_TRUE(state_->Describe(job).ok()) << "not a week yet";
  now_ += absl::Minutes(3);
  state_->RunRound(now_);
  EXPECT_EQ(state_->Describe(job).status().code(), absl::StatusCode::kNotFound) << "gone from the live views";
  std::optional<v1::JobAccount> a = Account(job);
  ASSERT_TRUE(a) << "history keeps it";
  EXPECT_TRUE(a->deleted());
  EXPECT_NEAR(a->gpu_hours(), 8.0, 1e-9);
  // Its name is free once the rename is in the store.
  while (std::optional<Persister::Write> w = state_->TakeWrite()) state_->WriteDone(*w, absl::OkStatus(), false);
  EXPECT_EQ(Submit(kJob), job) << "the name is free again";
}

TEST_F(ControlAccountingTest, AJobStillStoppingItsTasksLeavesTheLiveViewsOnceTheyStopped) {
  std::string job = Submit(kJob);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  ASSERT_TRUE(state_->Kill(job, "", now_).ok());  // its tasks are told to stop; they do not answer
  now_ += absl::Hours(24 * 8);
  state_->RunRound(now_);
  EXPECT_TRUE(state_->Describe(job).ok()) << "its tasks still hold their places";
  std::optional<v1::JobAccount> stopping = Account(job);
  ASSERT_TRUE(stopping);
  EXPECT_FALSE(stopping->settled());
  ReportAll(job, v1::TASK_KILLED);
  now_ += absl::Minutes(2);  // the next check, a minute on
  state_->RunRound(now_);
  EXPECT_EQ(state_->Describe(job).status().code(), absl::StatusCode::kNotFound);
  std::optional<v1::JobAccount> a = Account(job);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->deleted());
  EXPECT_TRUE(a->settled());
  EXPECT_NEAR(a->gpu_hours(), 8.0 * 24 * 8, 1e-6) << "held until they stopped";
}

TEST_F(ControlAccountingTest, ADeletedRecordIsPurgedFromTheStorePastTheAccountingRetention) {
  std::string job = Submit(kJob);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_SUCCEEDED);
  ASSERT_TRUE(state_->DeleteJob(job, now_).ok());
  auto purges = [this](absl::Status outcome = absl::OkStatus()) {
    std::vector<uint64_t> ids;
    std::string floor;
    while (std::optional<Persister::Write> w = state_->TakeWrite()) {
      // As the shell does: the batch goes to the store, the rest is kept.
      WriteBatch sent = std::move(w->batch);
      for (const WriteBatch::Op& op : sent.ops()) {
        if (const auto* p = std::get_if<WriteBatch::PurgeJobOp>(&op)) ids.push_back(p->id);
        if (const auto* m = std::get_if<WriteBatch::PutMetaOp>(&op)) floor = m->value;
      }
      state_->WriteDone(*w, outcome, false);
      if (!outcome.ok()) break;
    }
    return std::make_pair(ids, floor);
  };
  purges();
  now_ += absl::Hours(24 * 364);
  state_->RunRound(now_);
  EXPECT_TRUE(purges().first.empty()) << "within the year";
  now_ += absl::Hours(24 * 2);
  state_->RunRound(now_);
  EXPECT_THAT(purges(absl::UnavailableError("disk full")).first, ::testing::ElementsAre(1u));
  now_ += absl::Minutes(2);
  state_->RunRound(now_);
  auto [ids, floor] = purges();
  EXPECT_THAT(ids, ::testing::ElementsAre(1u)) << "asked again after the failed write";
  EXPECT_EQ(floor, "2") << "ids go on from where they were";
  v1::HistoryRequest all;
  EXPECT_EQ(views_.accounts().History(all, now_)->jobs_size(), 0) << "past the retention in the book too";
}

TEST_F(ControlAccountingTest, ARecordIsPurgedOnlyAfterItsRenameIsInTheStore) {
  // Jobs stay in the live views; history keeps a day: a job deleted two
  // days after it ended is past the retention at once.
  config_.accounting_retention_days = 1;
  config_.finished_job_retention_minutes = 0;
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok());
  state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  state_->Recover(StoreSnapshot{}, {}, now_);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 1, now_).ok());
  std::string job = Submit(kJob);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_SUCCEEDED);
  auto take = [this] {
    std::vector<std::string> ops;  // "update NAME", "purge ID"
    while (std::optional<Persister::Write> w = state_->TakeWrite()) {
      for (const WriteBatch::Op& op : w->batch.ops()) {
        if (const auto* u = std::get_if<WriteBatch::UpdateJobOp>(&op)) ops.push_back("update " + u->job.name());
        if (const auto* p = std::get_if<WriteBatch::PurgeJobOp>(&op)) ops.push_back("purge " + std::to_string(p->id));
      }
      state_->WriteDone(*w, absl::OkStatus(), false);
    }
    return ops;
  };
  take();
  now_ += absl::Hours(48);
  ASSERT_TRUE(state_->DeleteJob(job, now_).ok());
  state_->RunRound(now_);
  EXPECT_THAT(take(), ::testing::ElementsAre("update " + job + "#1")) << "the rename first, alone";
  now_ += absl::Minutes(2);
  state_->RunRound(now_);
  EXPECT_THAT(take(), ::testing::ElementsAre("purge 1"));
}

// A schedule's record that a failed write carried is written again (the
// shell has sent the batch itself away by then).
TEST_F(ControlAccountingTest, AScheduleWhoseWriteFailedIsWrittenAgain) {
  v1::ScheduleRecord rec;
  rec.set_name("nightly");
  rec.set_user("ana");
  rec.set_cron("@daily");
  ASSERT_TRUE(state_->CreateSchedule(rec, now_).ok());
  auto written = [this](absl::Status outcome) {
    std::vector<std::string> keys;
    while (std::optional<Persister::Write> w = state_->TakeWrite()) {
      WriteBatch sent = std::move(w->batch);
      for (const WriteBatch::Op& op : sent.ops()) {
        if (const auto* m = std::get_if<WriteBatch::PutMetaOp>(&op)) keys.push_back(m->key);
        if (const auto* m = std::get_if<WriteBatch::DeleteMetaOp>(&op)) keys.push_back("-" + m->key);
      }
      state_->WriteDone(*w, outcome, false);
      if (!outcome.ok()) break;
    }
    return keys;
  };
  EXPECT_THAT(written(absl::UnavailableError("disk full")), ::testing::Contains("schedule/nightly"));
  EXPECT_THAT(written(absl::OkStatus()), ::testing::Contains("schedule/nightly")) << "asked again";
  EXPECT_TRUE(written(absl::OkStatus()).empty()) << "once written, not again";
  std::vector<ScheduleFire> fires;
  ASSERT_TRUE(state_->UpdateSchedule("nightly", v1::SCHEDULE_DELETE, now_, &fires).ok());
  EXPECT_THAT(written(absl::UnavailableError("disk full")), ::testing::Contains("-schedule/nightly"));
  EXPECT_THAT(written(absl::OkStatus()), ::testing::Contains("-schedule/nightly")) << "a deletion too";
}

}  // namespace
}  // namespace trainyard::server

