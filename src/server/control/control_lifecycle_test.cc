// ControlState's job life-cycle beyond one gang: jobs that start with a
// smaller gang (minAvailable) and place the rest as room appears, jobs that
// can never fit, preempted jobs that say by whom, and the attempt count a
// task sees after a preemption. Events in with explicit times, effects
// recorded by a fake backend.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "api/restart_budgets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/test_backend.h"
#include "server/control/control_state.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ControlLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 5000;
    config_.elastic_grow_after_ms = 1000;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  void AddNode(const std::string& name, uint64_t session) {
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode(name, 8, "10.0.0." + name.substr(1)), session, now_).ok());
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

  void Status(const std::string& node, const v1::TaskSpec& t, v1::TaskState s) {
    v1::TaskStatus st;
    st.set_job(t.job());
    st.set_role(t.role());
    st.set_index(t.index());
    st.set_attempt(t.attempt());
    st.set_state(s);
    state_->OnTaskStatus(node, st, now_);
  }

  // Every launch of `job` so far reports `s`.
  void ReportAll(const std::string& job, v1::TaskState s) {
    for (const auto& [node, t] : backend_.launches) {
      if (t.job() == job) Status(node, t, s);
    }
  }

  v1::JobView View(const std::string& job) {
    auto v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  std::vector<std::string> EventKinds(const std::string& job) {
    std::vector<std::string> kinds;
    v1::JobView v = View(job);
    for (const auto& e : v.events()) kinds.push_back(e.kind());
    return kinds;
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);  // 2027-01-15T08:00:00Z
  std::unique_ptr<ControlState> state_;
};

constexpr char kElastic[] = R"(
name: elastic
replicas:
  worker:
    count: 3
    minAvailable: 2
    resources: {gpus: 4}
    command: [train]
)";

TEST_F(ControlLifecycleTest, AJobBelowItsCountRunsAndPlacesTheRestAsRoomAppears) {
  AddNode("n1", 1);
  std::string job = Submit(kElastic);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u) << "the first gang of minAvailable tasks";
  EXPECT_EQ(View(job).reason(), "2 of 3 worker tasks placed; 1 wait for room: needs 4 GPUs on one node; the "
                                "most free on one node is 0 (n1)");
  ReportAll(job, v1::TASK_RUNNING);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING) << "the placed tasks run; the job does not sit in STARTING";
  AddNode("n2", 2);
  now_ += absl::Milliseconds(200);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 3u);
  EXPECT_EQ(backend_.launches[2].first, "n2");
  EXPECT_EQ(backend_.launches[2].second.index(), 2);
  EXPECT_EQ(View(job).reason(), "") << "nothing waits any more";
  Status("n2", backend_.launches[2].second, v1::TASK_RUNNING);
  ReportAll(job, v1::TASK_SUCCEEDED);
  EXPECT_EQ(View(job).state(), v1::JOB_SUCCEEDED);
}

TEST_F(ControlLifecycleTest, TheRestOfAnElasticJobIsPlacedWhenItsOwnTasksFreeTheRoom) {
  AddNode("n1", 1);
  std::string job = Submit(kElastic);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u);
  ReportAll(job, v1::TASK_RUNNING);
  Status("n1", backend_.launches[0].second, v1::TASK_SUCCEEDED);
  now_ += absl::Milliseconds(200);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 3u);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING) << "the last worker has not completed yet";
}

// An elastic role (minCount) as its user sees it: the job starts with the
// tasks that fit, its ranks and WORLD_SIZE naming only those; when room for
// more appears (and it ran at its size elasticGrowAfterMs) its tasks stop
// and it is placed again whole at the new size, the next membership epoch,
// without charging a budget. Production work shrinks it back towards
// minCount, and it grows again when that work ends.
constexpr char kElasticDdp[] = R"(
name: ddp
framework: pytorch
replicas:
  worker:
    count: 4
    minCount: 2
    resources: {gpus: 2}
    command: [train]
)";

// The env of the launches of `job` from `from` on, by task name.
std::map<std::string, std::map<std::string, std::string>> LaunchEnv(
    const std::vector<std::pair<std::string, v1::TaskSpec>>& launches, const std::string& job, size_t from) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (size_t i = from; i < launches.size(); ++i) {
    const v1::TaskSpec& t = launches[i].second;
    if (t.job() != job) continue;
    auto& env = out[absl::StrCat(t.role(), "-", t.index())];
    for (const char* k : {"WORLD_SIZE", "RANK", "TRAINYARD_MEMBERSHIP_EPOCH", "TRAINYARD_NUM_WORKERS",
                          "TRAINYARD_WORKER_ID", "TRAINYARD_RESTART_COUNT"}) {
      auto it = t.env().find(k);
      env[k] = it == t.env().end() ? "(unset)" : it->second;
    }
  }
  return out;
}

TEST_F(ControlLifecycleTest, AnElasticJobStartsWithWhatFitsAndGrowsWholeWhenRoomAppears) {
  AddNode("n1", 1);
  std::string filler = Submit("name: filler\nreplicas:\n  worker:\n    resources: {gpus: 4}\n    command: [x]\n");
  std::string job = Submit(kElasticDdp);
  state_->RunRound(now_);
  auto env = LaunchEnv(backend_.launches, job, 0);
  ASSERT_EQ(env.size(), 2u) << "minCount 2 of 4 fit beside the filler";
  for (int r = 0; r < 2; ++r) {
    auto& e = env[absl::StrCat("worker-", r)];
    EXPECT_EQ(e["WORLD_SIZE"], "2");
    EXPECT_EQ(e["RANK"], absl::StrCat(r));
    EXPECT_EQ(e["TRAINYARD_MEMBERSHIP_EPOCH"], "1");
    EXPECT_EQ(e["TRAINYARD_NUM_WORKERS"], "2");
    EXPECT_EQ(e["TRAINYARD_WORKER_ID"], absl::StrCat(r));
  }
  ReportAll(job, v1::TASK_RUNNING);
  ReportAll(filler, v1::TASK_RUNNING);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(View(job).membership_epoch(), 1);
  now_ += absl::Milliseconds(200);
  state_->RunRound(now_);
  EXPECT_EQ(View(job).reason(), "elastic: runs 2 of 4 tasks (membership epoch 1); grows when room for more appears: "
                                "needs 2 GPUs on one node; the most free on one node is 0 (n1)");

  // The filler ends: room for two more, but the job's size is not yet
  // elasticGrowAfterMs old.
  ReportAll(filler, v1::TASK_SUCCEEDED);
  size_t kills = backend_.kills.size();
  state_->RunRound(now_ + absl::Milliseconds(300));
  EXPECT_EQ(backend_.kills.size(), kills) << "no resize within elasticGrowAfterMs of its placement";
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.kills.size(), kills + 2) << "both tasks stop to grow";
  EXPECT_THAT(EventKinds(job), ::testing::Contains("resizing"));
  EXPECT_THAT(View(job).events(View(job).events_size() - 1).text(),
              StartsWith("growing from 2 to 4 of 4 tasks: room for 2 more appeared"));
  size_t before = backend_.launches.size();
  ReportAll(job, v1::TASK_KILLED);
  state_->RunRound(now_);
  env = LaunchEnv(backend_.launches, job, before);
  ASSERT_EQ(env.size(), 4u) << "placed again whole at 4";
  for (int r = 0; r < 4; ++r) {
    auto& e = env[absl::StrCat("worker-", r)];
    EXPECT_EQ(e["WORLD_SIZE"], "4");
    EXPECT_EQ(e["RANK"], absl::StrCat(r));
    EXPECT_EQ(e["TRAINYARD_MEMBERSHIP_EPOCH"], "2");
    EXPECT_EQ(e["TRAINYARD_NUM_WORKERS"], "4");
  }
  v1::JobView v = View(job);
  EXPECT_EQ(v.membership_epoch(), 2);
  EXPECT_EQ(v.reason(), "");
  ASSERT_GE(v.tasks(0).attempts_size(), 1);
  EXPECT_EQ(v.tasks(0).attempts(0).attempt_class(), v1::ATTEMPT_RESIZED);
  for (const auto& t : v.tasks()) {
    for (const auto& b : t.budgets()) EXPECT_EQ(b.spent(), 0) << t.name() << ": a resize spends no budget";
  }
  ReportAll(job, v1::TASK_RUNNING);
  ReportAll(job, v1::TASK_SUCCEEDED);
  EXPECT_EQ(View(job).state(), v1::JOB_SUCCEEDED);
}

TEST_F(ControlLifecycleTest, ProductionWorkShrinksAnElasticJobTowardsMinCountAndItGrowsBackAfter) {
  AddNode("n1", 1);
  std::string job = Submit(kElasticDdp);
  state_->RunRound(now_);
  ASSERT_EQ(LaunchEnv(backend_.launches, job, 0)["worker-3"]["WORLD_SIZE"], "4") << "all four fit at first";
  ReportAll(job, v1::TASK_RUNNING);
  EXPECT_EQ(View(job).membership_epoch(), 1);

  std::string prod = Submit("name: prod\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 4}\n"
                            "    command: [x]\n");
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  size_t before = backend_.launches.size();
  ReportAll(job, v1::TASK_KILLED);
  state_->RunRound(now_);
  state_->RunRound(now_ + absl::Milliseconds(200));
  auto env = LaunchEnv(backend_.launches, job, before);
  ASSERT_EQ(env.size(), 2u) << "back at minCount beside the production job";
  EXPECT_EQ(env["worker-0"]["WORLD_SIZE"], "2");
  EXPECT_EQ(env["worker-1"]["RANK"], "1");
  EXPECT_EQ(env["worker-1"]["TRAINYARD_MEMBERSHIP_EPOCH"], "2");
  EXPECT_EQ(LaunchEnv(backend_.launches, prod, 0).size(), 1u);
  ReportAll(job, v1::TASK_RUNNING);
  ReportAll(prod, v1::TASK_RUNNING);

  // The production job ends: the job grows back to 4.
  ReportAll(prod, v1::TASK_SUCCEEDED);
  now_ += absl::Seconds(2);
  state_->RunRound(now_);
  before = backend_.launches.size();
  ReportAll(job, v1::TASK_KILLED);
  state_->RunRound(now_);
  env = LaunchEnv(backend_.launches, job, before);
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env["worker-3"]["WORLD_SIZE"], "4");
  EXPECT_EQ(env["worker-3"]["TRAINYARD_MEMBERSHIP_EPOCH"], "3");
  std::vector<std::string> kinds = EventKinds(job);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "membership"), 3);
}

// Workers of an elastic job end one after the other: the room the first
// leaves is no reason to resize (and so start again) the job that is
// finishing.
TEST_F(ControlLifecycleTest, AnElasticJobWhoseWorkersEndOneByOneIsNotResizedAndSucceeds) {
  AddNode("n1", 1);
  std::string filler = Submit("name: filler\nreplicas:\n  worker:\n    resources: {gpus: 4}\n    command: [x]\n");
  std::string job = Submit(kElasticDdp);
  state_->RunRound(now_);
  ReportAll(filler, v1::TASK_RUNNING);
  ReportAll(job, v1::TASK_RUNNING);
  now_ += absl::Seconds(2);  // past elasticGrowAfterMs, within the node timeout
  state_->RunRound(now_);
  const v1::TaskSpec first = backend_.launches[1].second;
  ASSERT_EQ(first.job(), job);
  Status("n1", first, v1::TASK_SUCCEEDED);
  size_t kills = backend_.kills.size();
  now_ += absl::Milliseconds(500);
  state_->RunRound(now_);
  EXPECT_EQ(backend_.kills.size(), kills) << "worker-1 is not stopped for the room worker-0 left";
  EXPECT_THAT(View(job).reason(), HasSubstr("it grows only while all its tasks run"));
  ReportAll(job, v1::TASK_SUCCEEDED);
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_SUCCEEDED) << "the workers of its size completed; " << v.reason();
  EXPECT_EQ(v.membership_epoch(), 1);
}

TEST_F(ControlLifecycleTest, MinCountIsCheckedNamingTheField) {
  for (auto [yaml, want] : {
           std::pair{"    count: 2\n    minCount: 0\n", "replicas.worker.minCount: 0 must be at least 1"},
           std::pair{"    count: 2\n    minCount: 3\n", "replicas.worker.minCount: 3 must be between 1 and count 2"},
           std::pair{"    count: 4\n    minCount: 2\n    minAvailable: 2\n",
                     "replicas.worker.minCount: an elastic role (minCount) restarts at each new size"},
           std::pair{"    count: 4\n    minCount: 2\n  ps:\n    count: 2\n    minAvailable: 1\n",
                     "replicas.ps.minAvailable: role worker is elastic (minCount)"},
       }) {
    auto spec = api::LoadJobSpec(absl::StrCat("name: z\nreplicas:\n  worker:\n", yaml, "    command: [x]\n"),
                                 config_.limits);
    ASSERT_FALSE(spec.ok()) << yaml;
    EXPECT_THAT(spec.status().message(), HasSubstr(want));
  }
  // A master in the submitting client expects the spec's count at every size.
  auto spec = api::LoadJobSpec("name: z\nreplicas:\n  worker:\n    count: 4\n    minCount: 2\n    command: [x]\n",
                               config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->set_job_master_address("10.0.0.9:4000");
  auto prepared = state_->PrepareSubmit(*spec, now_);
  ASSERT_FALSE(prepared.ok());
  EXPECT_THAT(prepared.status().message(), HasSubstr("an elastic job's master runs as a task of the job"));
}

TEST_F(ControlLifecycleTest, MinAvailableZeroIsRefusedNamingTheField) {
  auto spec = api::LoadJobSpec("name: z\nreplicas:\n  worker:\n    count: 2\n    minAvailable: 0\n    command: [x]\n",
                               config_.limits);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("replicas.worker.minAvailable: 0 must be at least 1"));
}

TEST_F(ControlLifecycleTest, AJobThatCanNeverFitIsUnschedulableUntilABigEnoughClusterExists) {
  AddNode("n1", 1);
  AddNode("n2", 2);
  std::string job = Submit("name: big\nreplicas:\n  worker:\n    count: 3\n    resources: {gpus: 8}\n"
                           "    command: [train]\n");
  state_->RunRound(now_);
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_THAT(v.reason(), StartsWith("unschedulable: gang needs 3 worker tasks of 8 GPUs"));
  EXPECT_THAT(v.reason(), HasSubstr("the largest is n1: 8 GPUs"));
  EXPECT_THAT(EventKinds(job), ::testing::Contains("unschedulable"));
  state_->RunRound(now_ + absl::Seconds(1));
  std::vector<std::string> kinds = EventKinds(job);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "unschedulable"), 1) << "said once";
  AddNode("n3", 3);
  state_->RunRound(now_ + absl::Seconds(2));
  EXPECT_EQ(View(job).state(), v1::JOB_SCHEDULED);
}


TEST_F(ControlLifecycleTest, APreemptedJobSaysByWhomAndWhenAndStartsAgainWithItsAttemptCounted) {
  AddNode("n1", 1);
  std::string low = Submit("name: low\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 4}\n"
                           "    command: [train]\n");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[0].second.env().at("TRAINYARD_RESTART_COUNT"), "0");
  ReportAll(low, v1::TASK_RUNNING);
  std::string high = Submit("name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                            "    command: [train]\n");
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.kills.size(), 2u);
  ReportAll(low, v1::TASK_KILLED);
  state_->RunRound(now_);
  v1::JobView v = View(low);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_THAT(v.reason(), StartsWith("preempted by job high (priority production) at 2027-01-15T08:00:01Z; "
                                     "waiting: "));
  EXPECT_THAT(EventKinds(low), ::testing::Contains("preempted"));
  // The production job ends; the ptr job starts again, its tasks on their
  // second attempt.
  for (const auto& [node, t] : std::vector(backend_.launches)) {
    if (t.job() == high) Status(node, t, v1::TASK_RUNNING), Status(node, t, v1::TASK_SUCCEEDED);
  }
  size_t before = backend_.launches.size();
  state_->RunRound(now_ + absl::Seconds(1));
  ASSERT_EQ(backend_.launches.size(), before + 2);
  for (size_t i = before; i < backend_.launches.size(); ++i) {
    const v1::TaskSpec& t = backend_.launches[i].second;
    EXPECT_EQ(t.env().at("TRAINYARD_RESTART_COUNT"), "1") << t.role() << "-" << t.index();
    EXPECT_EQ(t.env().at("TRAINYARD_ATTEMPT"), "1");
  }
  EXPECT_EQ(View(low).reason(), "") << "placed again: the note is gone";
}

// restartBudgets.preemption: a job may be preempted that many times; each
// preemption spends one of each of its launched tasks, and the next one
// after the budget is spent ends the job FAILED, naming the class and
// budget, instead of requeueing it.
TEST_F(ControlLifecycleTest, AJobPreemptedPastItsPreemptionBudgetFailsSayingSo) {
  AddNode("n1", 1);
  std::string low = Submit("name: low\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 4}\n"
                           "    restartBudgets: {preemption: 1}\n    command: [train]\n");
  state_->RunRound(now_);
  ReportAll(low, v1::TASK_RUNNING);
  auto budgets = [&](const v1::JobView& v) {
    std::string out;
    for (const auto& t : v.tasks()) {
      for (const auto& b : t.budgets()) {
        if (b.attempt_class() == v1::ATTEMPT_PREEMPTED) absl::StrAppend(&out, t.name(), ": ", api::BudgetText(b), "; ");
      }
    }
    return out;
  };
  EXPECT_EQ(budgets(View(low)), "low-worker-0: preemption budget 1 of 1 left; low-worker-1: preemption budget 1 of 1 left; ");

  // The first preemption requeues it and spends the budget.
  std::string high = Submit("name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                            "    command: [train]\n");
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ReportAll(low, v1::TASK_KILLED);
  state_->RunRound(now_);
  EXPECT_EQ(View(low).state(), v1::JOB_QUEUED);
  EXPECT_EQ(budgets(View(low)), "low-worker-0: preemption budget 0 of 1 left; low-worker-1: preemption budget 0 of 1 left; ");
  for (const auto& [node, t] : std::vector(backend_.launches)) {
    if (t.job() == high) Status(node, t, v1::TASK_RUNNING), Status(node, t, v1::TASK_SUCCEEDED);
  }
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ReportAll(low, v1::TASK_RUNNING);
  ASSERT_EQ(View(low).state(), v1::JOB_RUNNING);

  // The second finds it spent: the job fails, and the preemptor gets the room.
  std::string again = Submit("name: again\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                             "    command: [train]\n");
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ReportAll(low, v1::TASK_KILLED);
  state_->RunRound(now_);
  v1::JobView v = View(low);
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_EQ(v.reason(), "task low-worker-0 was preempted by job " + again +
                            " (priority production) at 2027-01-15T08:00:03Z (PREEMPTED; preemption budget 0 of 1 left)");
  state_->RunRound(now_);
  EXPECT_EQ(View(again).state(), v1::JOB_SCHEDULED);
}

// The victim's agent never confirms the stop: once the grace is well past,
// a victim with no preemption left fails and gives up its GPUs at once,
// as a requeue would, so the preemptor is not kept waiting.
TEST_F(ControlLifecycleTest, AnOverdueVictimWithNoPreemptionLeftFailsAndFreesItsRoom) {
  config_.node_timeout_ms = 24 * 3600 * 1000;  // its node stays live without heartbeats
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok()) << sched.status();
  state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  state_->Recover(StoreSnapshot{}, {}, now_);
  AddNode("n1", 1);
  std::string low = Submit("name: low\npriority: ptr\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                           "    restartBudgets: {preemption: 0}\n    command: [train]\n");
  state_->RunRound(now_);
  ReportAll(low, v1::TASK_RUNNING);
  std::string high = Submit("name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                            "    command: [train]\n");
  now_ += absl::Seconds(1);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(View(low).state(), v1::JOB_RUNNING) << "stopping, within its grace";
  now_ += absl::Minutes(10);  // no word from the agent
  state_->RunRound(now_);
  v1::JobView v = View(low);
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("(PREEMPTED; preemption budget 0 of 0 left)"));
  state_->RunRound(now_);
  EXPECT_EQ(View(high).state(), v1::JOB_SCHEDULED);
}

TEST_F(ControlLifecycleTest, ATaskThatNeverStartedHasNoEarlierAttemptAfterItsJobIsRequeued) {
  AddNode("n1", 1);
  std::string low = Submit("name: low\npriority: ptr\nreplicas:\n  worker:\n    count: 3\n    minAvailable: 2\n"
                           "    resources: {gpus: 4}\n    command: [train]\n");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u);
  ReportAll(low, v1::TASK_RUNNING);
  std::string high = Submit("name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                            "    command: [train]\n");
  state_->RunRound(now_);
  ReportAll(low, v1::TASK_KILLED);
  ASSERT_EQ(View(low).state(), v1::JOB_QUEUED);
  v1::JobView v = View(low);
  for (const auto& t : v.tasks()) {
    EXPECT_EQ(t.attempt(), t.index() < 2 ? 1 : 0) << t.name() << ": only the placed tasks had an attempt";
  }
}

constexpr char kRestarting[] = R"(
name: steady
replicas:
  worker:
    count: 1
    restartPolicy: OnFailure
    maxRestarts: 3
    resources: {gpus: 1}
    command: [train]
)";

TEST_F(ControlLifecycleTest, AnAgentThatStopsOnPurposeRequeuesItsJobsWithoutChargingARestart) {
  AddNode("n1", 1);
  // Not even a preemption: a job that may not be preempted once is requeued.
  std::string job = Submit(absl::StrCat(kRestarting, "    restartBudgets: {preemption: 0}\n"));
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  ReportAll(job, v1::TASK_RUNNING);
  state_->AgentDraining("n1", "its agent was stopped by signal 15", now_);
  ASSERT_EQ(backend_.kills.size(), 1u) << "its tasks are stopped";
  EXPECT_TRUE(backend_.drained.empty()) << "not before the server has seen them end";
  ReportAll(job, v1::TASK_KILLED);  // what the agent reports as it stops them
  EXPECT_EQ(backend_.drained, std::vector<std::string>{"n1"});
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED) << "not FAILED: " << v.reason();
  EXPECT_THAT(v.reason(), StartsWith("stopped with node n1 (its agent was stopped by signal 15) at "));
  EXPECT_EQ(v.tasks(0).restarts(), 0);
  EXPECT_EQ(v.tasks(0).attempt(), 1);
  for (const auto& b : v.tasks(0).budgets()) {
    if (b.attempt_class() == v1::ATTEMPT_PREEMPTED) {
      EXPECT_EQ(b.spent(), 0);
    }
  }
  state_->RunRound(now_);
  EXPECT_EQ(backend_.launches.size(), 1u) << "nothing new goes to a node that is stopping";
  state_->AgentDisconnected("n1", 1);
  AddNode("n1", 2);  // the cluster is back
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[1].second.env().at("TRAINYARD_RESTART_COUNT"), "1");
  EXPECT_EQ(backend_.launches[1].second.max_restarts(), 3) << "the whole budget is left";
}

TEST_F(ControlLifecycleTest, AHungWorkerReportedByItsMasterIsStoppedAsAFailureOfThatAttemptOnly) {
  AddNode("n1", 1);
  std::string job = Submit(kRestarting);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  v1::WorkerFailureRequest req;
  req.set_job(job);
  req.set_worker_id(0);
  req.set_attempt(0);
  req.set_reason("no ping for 5.2s");
  ASSERT_TRUE(state_->WorkerFailed(req, now_).ok());
  ASSERT_EQ(backend_.kills.size(), 1u);
  const v1::KillTask& k = backend_.kills[0].second;
  EXPECT_TRUE(k.fail_attempt());
  EXPECT_EQ(k.attempt(), 0);
  EXPECT_EQ(k.reason(), "no ping for 5.2s");
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING) << "its restart policy decides";
  // The agent restarted it (attempt 1); a late report about attempt 0 is dropped.
  v1::TaskStatus st;
  st.set_job(job);
  st.set_role("worker");
  st.set_attempt(0);
  st.set_launch_attempt(0);
  st.set_state(v1::TASK_RESTARTING);
  state_->OnTaskStatus("n1", st, now_);
  st.set_attempt(1);
  st.set_state(v1::TASK_RUNNING);
  state_->OnTaskStatus("n1", st, now_);
  ASSERT_TRUE(state_->WorkerFailed(req, now_).ok());
  EXPECT_EQ(backend_.kills.size(), 1u);
  req.set_worker_id(7);
  EXPECT_TRUE(absl::IsNotFound(state_->WorkerFailed(req, now_)));
}

constexpr char kWithService[] = R"(
name: train
replicas:
  worker:
    count: 2
    command: [train]
  board:
    kind: service
    command: [tensorboard]
)";

// The launch of `role` 0 of `job`.
v1::TaskSpec LaunchOf(const testing::RecordingBackend& backend, const std::string& job, const std::string& role) {
  for (const auto& [node, t] : backend.launches) {
    if (t.job() == job && t.role() == role) return t;
  }
  ADD_FAILURE() << "no launch of " << job << " " << role;
  return v1::TaskSpec();
}

TEST_F(ControlLifecycleTest, AServiceThatFailsForGoodLeavesTheTrainingRunningAndIsStoppedWithIt) {
  AddNode("n1", 1);
  std::string job = Submit(kWithService);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  v1::TaskSpec board = LaunchOf(backend_, job, "board");
  EXPECT_FALSE(board.env().contains("RANK"));
  EXPECT_TRUE(board.env().contains("TRAINYARD_SERVICE_PORT"));
  Status("n1", board, v1::TASK_FAILED);
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_RUNNING) << v.reason();
  EXPECT_THAT(EventKinds(job), ::testing::Contains("service_failed"));
  // The workers done, the job succeeds (the service does not count).
  for (const auto& [node, t] : backend_.launches) {
    if (t.job() == job && t.role() == "worker") Status(node, t, v1::TASK_SUCCEEDED);
  }
  EXPECT_EQ(View(job).state(), v1::JOB_SUCCEEDED) << View(job).reason();
}

TEST_F(ControlLifecycleTest, AWorkerThatFailsStillFailsAJobWithAServiceAndTheServiceIsStopped) {
  AddNode("n1", 1);
  std::string job = Submit(kWithService);
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  Status("n1", LaunchOf(backend_, job, "worker"), v1::TASK_FAILED);
  v1::JobView v = View(job);
  EXPECT_THAT(v.reason(), HasSubstr("task train-worker-"));
  bool board_killed = false;
  for (const auto& [node, k] : backend_.kills) board_killed |= k.role() == "board";
  EXPECT_TRUE(board_killed);
}

TEST_F(ControlLifecycleTest, AJobOfAServiceAloneFailsWithIt) {
  AddNode("n1", 1);
  std::string job = Submit("name: tb\nreplicas:\n  board:\n    kind: service\n    command: [tensorboard]\n");
  state_->RunRound(now_);
  ReportAll(job, v1::TASK_RUNNING);
  ReportAll(job, v1::TASK_FAILED);
  EXPECT_THAT(View(job).reason(), HasSubstr("task tb-board-0 failed"));
}

}  // namespace
}  // namespace trainyard::server
