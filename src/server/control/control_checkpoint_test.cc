// ControlState's coordinated checkpoints: a victim with a job master is
// ordered to checkpoint instead of being sent SIGTERM; its tasks are stopped
// once the master reports its workers saved (or at the deadline), and the
// next start resumes at the saved step. Explicit time, a recording backend.
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

constexpr char kLow[] = "name: low\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 4}\n"
                        "    command: [train]\n";
constexpr char kControlCheckpointHigh[] = "name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                         "    command: [train]\n";
constexpr char kMaster[] = "10.0.0.99:7000";  // a master in the submitting client

class ControlCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 600000;  // the node stays while the test's clock jumps
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 1, now_).ok());
  }

  std::string Submit(const std::string& yaml, const std::string& master) {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return "";
    spec->set_job_master_address(master);
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    auto resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    return resp.ok() ? resp->job() : "";
  }

  void ReportAll(const std::string& job, v1::TaskState s) {
    for (const auto& [node, t] : std::vector(backend_.launches)) {
      if (t.job() != job) continue;
      v1::TaskStatus st;
      st.set_job(t.job());
      st.set_role(t.role());
      st.set_index(t.index());
      st.set_attempt(t.attempt());
      st.set_state(s);
      state_->OnTaskStatus(node, st, now_);
    }
  }

  v1::JobView View(const std::string& job) {
    auto v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  // `low` runs with a master; `high` comes and preempts it.
  std::string RunLowThenPreempt(const std::string& master = kMaster) {
    std::string low = Submit(kLow, master);
    state_->RunRound(now_);
    EXPECT_EQ(backend_.launches.size(), 2u);
    ReportAll(low, v1::TASK_RUNNING);
    Submit(kControlCheckpointHigh, "");
    now_ += absl::Seconds(1);
    state_->RunRound(now_);
    return low;
  }

  v1::CheckpointReport Report(const std::string& job, int64_t order, bool saved, int64_t step) {
    v1::CheckpointReport r;
    r.set_job(job);
    r.set_order_id(order);
    r.set_saved(saved);
    r.set_step(step);
    r.set_workers(2);
    r.set_master_address(kMaster);
    return r;
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlCheckpointTest, AVictimWithAMasterSavesFirstThenStopsAndResumesAtTheSavedStep) {
  std::string low = RunLowThenPreempt();
  EXPECT_TRUE(backend_.kills.empty()) << "no SIGTERM while the workers checkpoint";
  v1::JobView v = View(low);
  ASSERT_GT(v.checkpoint_order().id(), 0);
  EXPECT_TRUE(backend_.orders.empty()) << "a master in the client (an address it chose) hears at its report only";
  const int64_t order = v.checkpoint_order().id();
  EXPECT_EQ(v.checkpoint_order().reason(), "preempted by high");
  EXPECT_EQ(v.checkpoint_order().deadline_unix_ms(), absl::ToUnixMillis(now_ + absl::Seconds(30)))
      << "the preemption's grace";

  now_ += absl::Seconds(2);
  ASSERT_TRUE(state_->CheckpointReported(Report(low, order, true, 1200), now_).ok());
  ASSERT_EQ(backend_.kills.size(), 2u) << "stopped once saved, not at the deadline";
  EXPECT_EQ(backend_.kills[0].second.grace_ms(), config_.kill_grace_ms);
  EXPECT_EQ(View(low).checkpoint_order().id(), 0) << "the order is closed";
  EXPECT_EQ(View(low).resume_step(), 1200);
  std::vector<std::string> texts;
  v1::JobView after = View(low);
  for (const auto& e : after.events()) texts.push_back(e.kind() + ": " + e.text());
  EXPECT_THAT(texts, ::testing::Contains("checkpointed: 2 workers saved step 1200; its tasks are stopped and resume "
                                         "there"));

  ReportAll(low, v1::TASK_KILLED);
  state_->RunRound(now_);
  EXPECT_EQ(View(low).state(), v1::JOB_QUEUED);
  // The production job ends; the victim starts again at the saved step.
  for (const auto& [node, t] : std::vector(backend_.launches)) {
    if (t.job() != low) ReportAll(t.job(), v1::TASK_SUCCEEDED);
  }
  size_t before = backend_.launches.size();
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), before + 2);
  for (size_t i = before; i < backend_.launches.size(); ++i) {
    EXPECT_EQ(backend_.launches[i].second.env().at("TRAINYARD_RESUME_STEP"), "1200");
  }
}

TEST_F(ControlCheckpointTest, WorkersThatDoNotSaveByTheDeadlineAreStoppedThen) {
  std::string low = RunLowThenPreempt();
  now_ += absl::Seconds(29);
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.kills.empty());
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.kills.size(), 2u);
  EXPECT_EQ(View(low).checkpoint_order().id(), 0);
  EXPECT_FALSE(View(low).has_resume_step());
  // A late report finds no open order.
  absl::Status late = state_->CheckpointReported(Report(low, 1, true, 5), now_);
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_THAT(late.message(), HasSubstr("it has none"));
}

TEST_F(ControlCheckpointTest, AJobWhoseWorkersDoNotCheckpointGetsTheRestOfTheGrace) {
  std::string low = RunLowThenPreempt();
  now_ += absl::Seconds(10);
  ASSERT_TRUE(state_->CheckpointReported(Report(low, View(low).checkpoint_order().id(), false, 0), now_).ok());
  ASSERT_EQ(backend_.kills.size(), 2u);
  EXPECT_EQ(backend_.kills[0].second.grace_ms(), 20000) << "30 s of grace, 10 s of it gone";
  EXPECT_FALSE(View(low).has_resume_step());
}

TEST_F(ControlCheckpointTest, ReportsForAnotherOrderOrFromAReplacedMasterAreRefused) {
  std::string low = RunLowThenPreempt();
  absl::Status wrong = state_->CheckpointReported(Report(low, 7, true, 5), now_);
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong)) << wrong;
  v1::CheckpointReport old = Report(low, 1, true, 5);
  old.set_master_address("10.0.0.5:7000");
  absl::Status replaced = state_->CheckpointReported(old, now_);
  EXPECT_TRUE(absl::IsFailedPrecondition(replaced)) << replaced;
  EXPECT_THAT(replaced.message(), HasSubstr("was replaced"));
  EXPECT_TRUE(backend_.kills.empty());
  EXPECT_TRUE(absl::IsNotFound(state_->CheckpointReported(Report("nope", 1, true, 5), now_)));
}

TEST_F(ControlCheckpointTest, AKillDuringTheOrderStopsTheTasksAtOnce) {
  std::string low = RunLowThenPreempt();
  ASSERT_TRUE(state_->Kill(low, "", now_).ok());
  EXPECT_EQ(backend_.kills.size(), 2u);
  EXPECT_EQ(View(low).checkpoint_order().id(), 0);
}

TEST_F(ControlCheckpointTest, AJobPastItsTimeLimitIsOrderedOnceAndAKillStopsItsSavingAtOnce) {
  std::string low = RunLowThenPreempt();
  int64_t order = View(low).checkpoint_order().id();
  // Still saving for the preemption when its time limit would order again:
  // nothing new here, so the preemptor does not wait twice.
  std::string timed = Submit("name: timed\nactiveDeadline: 5s\nreplicas:\n  worker:\n    command: [t]\n", kMaster);
  EXPECT_EQ(View(low).checkpoint_order().id(), order);
  ASSERT_TRUE(state_->Kill(low, "", now_).ok());
  ReportAll(low, v1::TASK_KILLED);
  backend_.kills.clear();
  state_->RunRound(now_);
  ReportAll(timed, v1::TASK_RUNNING);
  ASSERT_EQ(View(timed).state(), v1::JOB_RUNNING);
  now_ += absl::Seconds(6);
  state_->RunRound(now_);
  ASSERT_EQ(View(timed).state(), v1::JOB_DEADLINE_EXCEEDED);
  ASSERT_GT(View(timed).checkpoint_order().id(), order) << "a later order has a larger id";
  EXPECT_TRUE(backend_.kills.empty()) << "its workers save first";
  ASSERT_TRUE(state_->Kill(timed, "no time", now_).ok());
  EXPECT_EQ(backend_.kills.size(), 1u) << "a kill stops a job that is saving";
  EXPECT_EQ(View(timed).checkpoint_order().id(), 0);
}

TEST_F(ControlCheckpointTest, AHeartbeatListingTheTasksOfAJobThatIsSavingSendsNoKill) {
  std::string timed = Submit("name: timed\nactiveDeadline: 5s\nreplicas:\n  worker:\n    count: 2\n"
                             "    command: [t]\n", kMaster);
  state_->RunRound(now_);
  ReportAll(timed, v1::TASK_RUNNING);
  now_ += absl::Seconds(6);
  state_->RunRound(now_);
  ASSERT_EQ(View(timed).state(), v1::JOB_DEADLINE_EXCEEDED);
  ASSERT_GT(View(timed).checkpoint_order().id(), 0);
  // Its node says it still runs them: they run on while they save (an ended
  // job's tasks are otherwise killed again, in case the first kill was lost).
  v1::Heartbeat hb;
  for (const auto& [node, t] : backend_.launches) {
    v1::TaskStatus* st = hb.add_tasks();
    st->set_job(t.job());
    st->set_job_id(t.job_id());
    st->set_role(t.role());
    st->set_index(t.index());
    st->set_attempt(t.attempt());
    st->set_state(v1::TASK_RUNNING);
  }
  state_->OnHeartbeat("n1", hb, now_);
  EXPECT_TRUE(backend_.kills.empty());
  ASSERT_TRUE(state_->CheckpointReported(Report("timed", View(timed).checkpoint_order().id(), true, 40), now_).ok());
  EXPECT_EQ(backend_.kills.size(), 2u);
  state_->OnHeartbeat("n1", hb, now_);
  EXPECT_EQ(backend_.kills.size(), 4u) << "saved: a task still listed is stopped again";
}

TEST_F(ControlCheckpointTest, AJobWithoutAMasterGetsSigtermAndItsGraceAsBefore) {
  std::string low = RunLowThenPreempt("");
  ASSERT_EQ(backend_.kills.size(), 2u);
  EXPECT_EQ(backend_.kills[0].second.grace_ms(), 30000);
  EXPECT_EQ(View(low).checkpoint_order().id(), 0);
}

// A master task the server started hears of its order at once, at the
// address its tasks were given (the backend pushes it to the master's port).
TEST_F(ControlCheckpointTest, TheOrderIsPushedToTheJobsMasterTaskWhenItIsMade) {
  config_.jobmaster_enabled = true;
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok()) << sched.status();
  state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  state_->Recover(StoreSnapshot{}, {}, now_);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 1, now_).ok());
  std::string low = Submit(kLow, "");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 3u) << "the master and 2 workers";
  std::string master;
  for (const auto& [node, t] : backend_.launches) {
    if (t.role() != "jobmaster") master = t.env().at("TRAINYARD_JOB_MASTER");
  }
  ASSERT_THAT(master, ::testing::StartsWith("10.0.0.1:"));
  ReportAll(low, v1::TASK_RUNNING);
  Submit(kControlCheckpointHigh, "");
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  v1::JobView v = View(low);
  ASSERT_GT(v.checkpoint_order().id(), 0);
  ASSERT_EQ(backend_.orders.size(), 1u);
  EXPECT_EQ(backend_.orders[0].first, master);
  EXPECT_EQ(backend_.orders[0].second.id(), v.checkpoint_order().id());
  EXPECT_EQ(backend_.orders[0].second.reason(), v.checkpoint_order().reason());
  // Repeated rounds while the workers save push nothing more.
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  EXPECT_EQ(backend_.orders.size(), 1u);
}

}  // namespace
}  // namespace trainyard::server
