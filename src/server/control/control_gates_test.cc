// Hold, dependencies and job arrays through ControlState, with explicit
// time: a held job is never placed until released; a dependent job waits
// with a reason naming its dependency and fails when an after-ok one does
// not succeed; an array's %N keeps the rest pending; all of it survives a
// server restart. No threads, no sockets, no clock.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_spec.h"
#include "api/task_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/admission.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"
#include "server/control/test_restart.h"
#include "server/control/test_status.h"
#include "store/memory_state_store.h"

namespace trainyard::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Spec(const std::string& name, const std::string& extra = "") {
  return absl::StrCat("name: ", name, "\n", extra, "replicas:\n  worker: {command: [train], resources: {gpus: 1}}\n");
}

class ControlGatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 86'400'000;  // liveness is not tested here
    state_ = Make();
    state_->Recover(StoreSnapshot{}, {}, now_);
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 1, now_).ok());
  }

  std::unique_ptr<ControlState> Make() {
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    EXPECT_TRUE(sched.ok()) << sched.status();
    return std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  }

  // Submits and keeps the jobs in the store, as the shell does; returns
  // the job's name (an array's elements, comma-joined) or the refusal.
  absl::StatusOr<std::string> Submit(const std::string& yaml) {
    v1::JobSpec spec;
    std::vector<std::string> problems = api::ParseJobSpecYamlInto(yaml, &spec);
    absl::StatusOr<CheckedSpec> checked =
        CheckSubmission(std::move(spec), std::move(problems), config_, core::SchedulerOptions{}.queues.root);
    if (!checked.ok()) return checked.status();
    std::vector<PreparedJob> prepared;
    if (checked->spec.array().empty()) {
      absl::StatusOr<PreparedJob> one = state_->PrepareChecked(*std::move(checked), now_);
      if (!one.ok()) return one.status();
      prepared.push_back(*std::move(one));
    } else {
      absl::StatusOr<std::vector<PreparedJob>> all = state_->PrepareArray(*std::move(checked), now_);
      if (!all.ok()) return all.status();
      prepared = *std::move(all);
    }
    WriteBatch create;
    for (const PreparedJob& p : prepared) create.CreateJob(p.rec, p.first_event);
    if (absl::Status kept = store_.Commit(std::move(create)); !kept.ok()) return kept;
    std::vector<std::string> names;
    for (PreparedJob& p : prepared) {
      absl::StatusOr<v1::SubmitResponse> resp = state_->AcceptCommitted(p, absl::OkStatus());
      if (!resp.ok()) return resp.status();
      names.push_back(resp->job());
    }
    return absl::StrJoin(names, ",");
  }

  v1::JobView View(const std::string& job) {
    absl::StatusOr<v1::JobView> v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  // The launches of `job` so far.
  std::vector<v1::TaskSpec> LaunchesOf(const std::string& job) {
    std::vector<v1::TaskSpec> out;
    for (const auto& [node, t] : backend_.launches) {
      if (t.job() == job) out.push_back(t);
    }
    return out;
  }

  // The job's (one) task runs and ends in `end`.
  void Finish(const std::string& job, v1::TaskState end) {
    std::vector<v1::TaskSpec> l = LaunchesOf(job);
    ASSERT_EQ(l.size(), 1u) << job;
    state_->OnTaskStatus("n1", testing::StatusOf(l[0], v1::TASK_RUNNING), now_);
    state_->OnTaskStatus("n1", testing::StatusOf(l[0], end), now_);
  }

  // How many events of `kind` the store holds for `job`.
  int EventsOf(const std::string& job, const std::string& kind) {
    testing::FlushWrites(*state_, store_);
    absl::StatusOr<v1::JobRecord> rec = store_.GetJobByName(job);
    EXPECT_TRUE(rec.ok()) << rec.status();
    if (!rec.ok()) return -1;
    absl::StatusOr<std::vector<v1::JobEventRecord>> events = store_.ListEvents(rec->id());
    EXPECT_TRUE(events.ok()) << events.status();
    int n = 0;
    for (const v1::JobEventRecord& e : *events) n += e.kind() == kind;
    return n;
  }

  // Deletes an ended job and frees its name, as the shell does once the
  // rename is durable.
  void Delete(const std::string& job) {
    ASSERT_TRUE(state_->DeleteJob(job, now_).ok()) << job;
    testing::FlushWrites(*state_, store_);
    state_->ReleaseName(job);
  }

  // The job's (one) task runs, then its node's agent stops on purpose: the
  // job goes back to the queue.
  void RunThenRequeue(const std::string& job) {
    std::vector<v1::TaskSpec> l = LaunchesOf(job);
    ASSERT_EQ(l.size(), 1u) << job;
    state_->OnTaskStatus("n1", testing::StatusOf(l[0], v1::TASK_RUNNING), now_);
    state_->AgentDraining("n1", "maintenance", now_);
    state_->OnTaskStatus("n1", testing::StatusOf(l[0], v1::TASK_KILLED), now_);
    Round();
    ASSERT_EQ(View(job).state(), v1::JOB_QUEUED);
  }

  void Round() {
    now_ += absl::Seconds(1);
    state_->RunRound(now_);
    absl::Status ok = state_->CheckInvariantsForTest();
    ASSERT_TRUE(ok.ok()) << ok;
  }

  void Restart() {
    testing::FlushWrites(*state_, store_);
    state_ = Make();
    testing::RecoverFromStore(store_, *state_, now_);
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 8, "10.0.0.1"), 2, now_).ok());
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  MemoryStateStore store_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlGatesTest, AStartedThrottledElementRequeuedKeepsItsDeadlineAcrossARestart) {
  absl::StatusOr<std::string> jobs = Submit(Spec("tp", "array: 0-1%1\nactiveDeadline: 10s\n"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  Round();
  RunThenRequeue("tp-0");
  Restart();
  for (int i = 0; i < 9; ++i) Round();
  EXPECT_EQ(View("tp-0").state(), v1::JOB_DEADLINE_EXCEEDED) << "its clock runs from when it first ran";
}

TEST_F(ControlGatesTest, ADependencyDeletedAfterItSucceededStillLetsTheJobRunEvenIfItsNameIsTakenAgain) {
  ASSERT_TRUE(Submit(Spec("a")).ok());
  ASSERT_TRUE(Submit(Spec("b", "hold: true\ndependencies: {afterOk: [a]}\n")).ok());
  Round();
  Finish("a", v1::TASK_SUCCEEDED);
  ASSERT_EQ(View("a").state(), v1::JOB_SUCCEEDED);
  Delete("a");
  Restart();  // the deleted record alone says how it ended
  absl::StatusOr<std::string> again = Submit(Spec("a", "hold: true\n"));
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(*again, "a");  // a new job under the name: not b's dependency
  ASSERT_TRUE(state_->Release("b", now_).ok());
  Round();
  EXPECT_EQ(LaunchesOf("b").size(), 1u);
  EXPECT_EQ(View("b").state(), v1::JOB_SCHEDULED);
}

TEST_F(ControlGatesTest, ADeletedFailedArrayElementStillFailsAfterOk) {
  absl::StatusOr<std::string> arr = Submit(Spec("arr", "array: 0-1\n"));
  ASSERT_TRUE(arr.ok()) << arr.status();
  ASSERT_EQ(*arr, "arr-0,arr-1");
  ASSERT_TRUE(Submit(Spec("c", "dependencies: {afterOk: [arr]}\n")).ok());
  Round();
  Finish("arr-0", v1::TASK_SUCCEEDED);
  Finish("arr-1", v1::TASK_FAILED);
  Delete("arr-1");
  Round();
  v1::JobView v = View("c");
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("dependency arr-1 ended FAILED"));
  EXPECT_TRUE(LaunchesOf("c").empty());
}

TEST_F(ControlGatesTest, AJobThatPassedItsGateIsNotGatedAgainAfterARequeueAndARestart) {
  ASSERT_TRUE(Submit(Spec("d0")).ok());
  ASSERT_TRUE(Submit(Spec("g", "dependencies: {afterOk: [d0]}\n")).ok());
  Round();
  Finish("d0", v1::TASK_SUCCEEDED);
  Round();
  RunThenRequeue("g");
  Delete("d0");
  Restart();
  Round();
  Round();
  EXPECT_EQ(EventsOf("g", "eligible"), 1);
  EXPECT_NE(View("g").state(), v1::JOB_FAILED);
}

TEST_F(ControlGatesTest, AnArrayCountsEachElementAgainstTheSubmissionRate) {
  config_.max_submissions_per_second_per_user = 4;
  Restart();
  absl::StatusOr<std::string> big = Submit(Spec("big", "array: 0-4\n"));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("an array of 5 elements"));
  EXPECT_THAT(big.status().message(), HasSubstr("maxSubmissionsPerSecondPerUser"));
  ASSERT_TRUE(Submit(Spec("three", "array: 0-2\n")).ok());  // 3 of the 4
  absl::StatusOr<std::string> two = Submit(Spec("two", "array: 0-1\n"));
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.status().message(), HasSubstr("maxSubmissionsPerSecondPerUser"));
  EXPECT_TRUE(Submit(Spec("one")).ok());  // the last one
}

TEST_F(ControlGatesTest, AHeldJobIsNeverPlacedUntilReleased) {
  ASSERT_TRUE(Submit(Spec("held", "hold: true\n")).ok());
  for (int i = 0; i < 3; ++i) Round();
  EXPECT_TRUE(LaunchesOf("held").empty());
  v1::JobView v = View("held");
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_TRUE(v.held());
  EXPECT_EQ(v.reason(), "held (trainyard release held)");

  absl::StatusOr<std::vector<std::string>> released = state_->Release("held", now_);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_THAT(*released, ElementsAre("held"));
  Round();
  EXPECT_EQ(LaunchesOf("held").size(), 1u);
  EXPECT_EQ(View("held").state(), v1::JOB_SCHEDULED);
  EXPECT_FALSE(View("held").held());
  EXPECT_EQ(state_->Release("held", now_).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state_->Release("nosuch", now_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ControlGatesTest, AHeldJobCanBeKilled) {
  ASSERT_TRUE(Submit(Spec("held", "hold: true\n")).ok());
  Round();
  ASSERT_TRUE(state_->Kill("held", "", now_).ok());
  Round();
  EXPECT_EQ(View("held").state(), v1::JOB_KILLED);
  EXPECT_TRUE(LaunchesOf("held").empty());
}

TEST_F(ControlGatesTest, AfterOkWaitsNamingTheDependencyThenRunsWhenItSucceeded) {
  ASSERT_TRUE(Submit(Spec("first")).ok());
  ASSERT_TRUE(Submit(Spec("second", "dependencies: {afterOk: [first]}\n")).ok());
  Round();
  EXPECT_EQ(LaunchesOf("first").size(), 1u);
  EXPECT_TRUE(LaunchesOf("second").empty());
  EXPECT_EQ(View("second").reason(), "waiting for job first (after-ok)");
  Finish("first", v1::TASK_SUCCEEDED);
  ASSERT_EQ(View("first").state(), v1::JOB_SUCCEEDED);
  Round();
  EXPECT_EQ(LaunchesOf("second").size(), 1u);
}

TEST_F(ControlGatesTest, AfterOkFailsTheJobWhenTheDependencyDoesNotSucceed) {
  ASSERT_TRUE(Submit(Spec("first")).ok());
  ASSERT_TRUE(Submit(Spec("second", "dependencies: {afterOk: [first]}\n")).ok());
  Round();
  Finish("first", v1::TASK_FAILED);
  ASSERT_EQ(View("first").state(), v1::JOB_FAILED);
  Round();
  v1::JobView v = View("second");
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("dependency first ended FAILED"));
  EXPECT_TRUE(LaunchesOf("second").empty());
}

TEST_F(ControlGatesTest, AfterAnyRunsHoweverTheDependencyEnded) {
  ASSERT_TRUE(Submit(Spec("first")).ok());
  ASSERT_TRUE(Submit(Spec("second", "dependencies: {afterAny: [first]}\n")).ok());
  Round();
  EXPECT_EQ(View("second").reason(), "waiting for job first (after-any)");
  Finish("first", v1::TASK_FAILED);
  Round();
  EXPECT_EQ(LaunchesOf("second").size(), 1u);
}

TEST_F(ControlGatesTest, AnUnknownDependencyIsRefusedNamingTheField) {
  absl::StatusOr<std::string> r = Submit(Spec("second", "dependencies: {afterOk: [nosuch]}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("dependencies.afterOk[0]: job 'nosuch' does not exist"));
}

TEST_F(ControlGatesTest, AnArrayThrottleKeepsTheRestPendingAndAfterOkWaitsForEveryElement) {
  absl::StatusOr<std::string> arr = Submit(Spec("sweep", "array: 0-3%2\n"));
  ASSERT_TRUE(arr.ok()) << arr.status();
  EXPECT_EQ(*arr, "sweep-0,sweep-1,sweep-2,sweep-3");
  ASSERT_TRUE(Submit(Spec("report", "dependencies: {afterOk: [sweep]}\n")).ok());
  Round();
  EXPECT_EQ(LaunchesOf("sweep-0").size(), 1u);
  EXPECT_EQ(LaunchesOf("sweep-1").size(), 1u);
  EXPECT_TRUE(LaunchesOf("sweep-2").empty());
  EXPECT_EQ(View("sweep-2").reason(), "array sweep: 2 of its elements already placed (at most 2 at once, %2)");
  EXPECT_EQ(View("sweep-2").array_job(), "sweep");
  EXPECT_EQ(View("sweep-2").array_index(), 2);
  EXPECT_EQ(View("report").reason(), "waiting for job sweep (after-ok)");
  // Each element knows its place in the array.
  v1::TaskSpec t = LaunchesOf("sweep-1")[0];
  EXPECT_EQ(t.env().at(kArrayJobEnv), "sweep");
  EXPECT_EQ(t.env().at(kArrayIndexEnv), "1");

  Finish("sweep-0", v1::TASK_SUCCEEDED);
  Round();
  EXPECT_EQ(LaunchesOf("sweep-2").size(), 1u);
  EXPECT_TRUE(LaunchesOf("sweep-3").empty());
  Finish("sweep-1", v1::TASK_SUCCEEDED);
  Finish("sweep-2", v1::TASK_SUCCEEDED);
  Round();
  EXPECT_TRUE(LaunchesOf("report").empty()) << "sweep-3 has not run yet";
  Finish("sweep-3", v1::TASK_SUCCEEDED);
  Round();
  EXPECT_EQ(LaunchesOf("report").size(), 1u);
}

TEST_F(ControlGatesTest, AnArrayTakesAFreeNameForItselfAndEveryElement) {
  ASSERT_TRUE(Submit(Spec("sweep-1")).ok());
  absl::StatusOr<std::string> arr = Submit(Spec("sweep", "array: 0-1\n"));
  ASSERT_TRUE(arr.ok()) << arr.status();
  EXPECT_EQ(*arr, "sweep-2-0,sweep-2-1");
  absl::StatusOr<std::string> single = Submit(Spec("sweep-2"));
  ASSERT_TRUE(single.ok());
  EXPECT_NE(*single, "sweep-2") << "the array's name is taken";
}

TEST_F(ControlGatesTest, HeldJobsDependenciesAndThrottleSurviveARestart) {
  ASSERT_TRUE(Submit(Spec("first")).ok());
  ASSERT_TRUE(Submit(Spec("held", "hold: true\n")).ok());
  ASSERT_TRUE(Submit(Spec("second", "dependencies: {afterOk: [first]}\n")).ok());
  ASSERT_TRUE(Submit(Spec("sweep", "array: 0-2%1\n")).ok());
  Round();
  Restart();
  Round();
  EXPECT_EQ(View("held").reason(), "held (trainyard release held)");
  EXPECT_EQ(View("second").reason(), "waiting for job first (after-ok)");
  EXPECT_EQ(View("sweep-1").reason(), "array sweep: 1 of its elements already placed (at most 1 at once, %1)");
  size_t before = backend_.launches.size();
  Round();
  for (size_t i = before; i < backend_.launches.size(); ++i) {
    EXPECT_NE(backend_.launches[i].second.job(), "held");
    EXPECT_NE(backend_.launches[i].second.job(), "second");
    EXPECT_NE(backend_.launches[i].second.job(), "sweep-1");
  }
  ASSERT_TRUE(state_->Release("held", now_).ok());
  Round();
  EXPECT_EQ(View("held").state(), v1::JOB_SCHEDULED);
}

}  // namespace
}  // namespace trainyard::server
