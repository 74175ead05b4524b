// ControlState: the class of each ended attempt and the restart budget it
// spends (api/restart_budgets.h) — an OOM kill spends the OOM budget, not
// the failure one; a lost node restarts the task without spending the
// failure budget; a spent budget fails the job with a reason that names the
// class. Events in with explicit times, effects recorded by a fake backend.
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "api/restart_budgets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"
#include "server/control/test_status.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

class ControlAttemptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 5000;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  void AddNode(const std::string& name, uint64_t session) {
    absl::Status st = state_->RegisterAgent(testing::TestNode(name, 8, "10.0.0." + name.substr(1)), session, now_);
    ASSERT_TRUE(st.ok()) << st;
  }

  std::string Submit(const std::string& restart_lines) {
    std::string yaml = absl::StrCat("name: train\nreplicas:\n  worker:\n    count: 1\n    resources: {gpus: 1}\n",
                                    "    command: [train]\n", restart_lines);
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return "";
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    auto resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    return resp.ok() ? resp->job() : "";
  }

  // The latest launch's task ends its attempt `attempt` in `state` with
  // `c` (as its agent classifies it) and `exit`.
  void End(v1::TaskState state, int attempt, v1::AttemptClass c, v1::TaskExit exit) {
    const auto& [node, launch] = backend_.launches.back();
    v1::TaskStatus st = testing::StatusOf(launch, state);
    st.set_attempt(attempt);
    st.set_attempt_class(c);
    *st.mutable_exit() = exit;
    state_->OnTaskStatus(node, st, now_);
  }
  void Running(int attempt) {
    const auto& [node, launch] = backend_.launches.back();
    v1::TaskStatus st = testing::StatusOf(launch, v1::TASK_RUNNING);
    st.set_attempt(attempt);
    state_->OnTaskStatus(node, st, now_);
  }

  // Two nodes; the job's one task runs on one of them, which then goes
  // silent past the node timeout while the other is heard from.
  std::string SubmitAndLoseItsNode(const std::string& restart_lines) {
    AddNode("n1", 1);
    AddNode("n2", 2);
    std::string job = Submit(restart_lines);
    state_->RunRound(now_);
    EXPECT_EQ(backend_.launches.size(), 1u);
    std::string other = backend_.launches[0].first == "n1" ? "n2" : "n1";
    Running(0);
    now_ += absl::Seconds(6);
    state_->OnHeartbeat(other, v1::Heartbeat(), now_);
    state_->RunRound(now_);
    return job;
  }

  static v1::TaskExit Oom() {
    v1::TaskExit e;
    e.set_signal(9);
    e.set_oom_killed(true);
    return e;
  }
  static v1::TaskExit Code(int code) {
    v1::TaskExit e;
    e.set_exit_code(code);
    return e;
  }

  v1::JobView View(const std::string& job) {
    auto v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  // "failure budget 2 of 2 left, OOM budget ..." as describe shows it.
  static std::string Budgets(const v1::TaskView& t) {
    std::string out;
    for (const auto& b : t.budgets()) absl::StrAppend(&out, out.empty() ? "" : ", ", api::BudgetText(b));
    return out;
  }

  static bool HasEvent(const v1::JobView& v, const std::string& text) {
    for (const auto& e : v.events()) {
      if (absl::StrContains(e.text(), text)) return true;
    }
    return false;
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlAttemptsTest, AnOomKillSpendsTheOomBudgetNotTheFailureBudget) {
  AddNode("n1", 1);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 2\n    restartBudgets: {oom: 1}\n");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  // The agent is told both budgets, to restart in place within them.
  EXPECT_EQ(backend_.launches[0].second.max_restarts(), 2);
  EXPECT_EQ(backend_.launches[0].second.oom_max_restarts(), 1);
  Running(0);
  now_ += absl::Seconds(10);
  End(v1::TASK_RESTARTING, 0, v1::ATTEMPT_OOM_KILLED, Oom());
  v1::JobView v = View(job);
  ASSERT_EQ(v.tasks_size(), 1);
  EXPECT_EQ(Budgets(v.tasks(0)), "failure budget 2 of 2 left, OOM budget 0 of 1 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
  ASSERT_EQ(v.tasks(0).attempts_size(), 1);
  EXPECT_EQ(v.tasks(0).attempts(0).attempt_class(), v1::ATTEMPT_OOM_KILLED);
  EXPECT_EQ(v.tasks(0).attempts(0).node(), "n1");
  EXPECT_TRUE(v.tasks(0).attempts(0).restarted());
  EXPECT_TRUE(HasEvent(v, "train-worker-0 attempt 0 OOM_KILLED")) << v.DebugString();
  EXPECT_TRUE(HasEvent(v, "restarting as attempt 1 (OOM budget 0 of 1 left)")) << v.DebugString();
  // A program failure next still has its whole budget.
  Running(1);
  End(v1::TASK_RESTARTING, 1, v1::ATTEMPT_FAILED, Code(1));
  EXPECT_EQ(Budgets(View(job).tasks(0)),
            "failure budget 1 of 2 left, OOM budget 0 of 1 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
  // The second OOM kill finds the OOM budget spent: the agent ends the task
  // and the job fails naming the class.
  Running(2);
  End(v1::TASK_FAILED, 2, v1::ATTEMPT_OOM_KILLED, Oom());
  v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("(OOM_KILLED; OOM budget 0 of 1 left)"));
  ASSERT_EQ(v.tasks(0).attempts_size(), 3);
  EXPECT_EQ(v.tasks(0).attempts(1).attempt_class(), v1::ATTEMPT_FAILED);
  EXPECT_EQ(v.tasks(0).attempts(1).exit_code(), 1);
  EXPECT_FALSE(v.tasks(0).attempts(2).restarted());
  ManagerStats stats = state_->Stats();
  EXPECT_EQ((stats.attempts_ended[{v.queue(), "OOM_KILLED"}]), 2);
  EXPECT_EQ((stats.attempts_ended[{v.queue(), "FAILED"}]), 1);
}

TEST_F(ControlAttemptsTest, WithoutAnOomBudgetAnOomKillHasAsManyRestartsAsMaxRestarts) {
  AddNode("n1", 1);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 3\n");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(backend_.launches[0].second.oom_max_restarts(), 3);
  EXPECT_EQ(Budgets(View(job).tasks(0)),
            "failure budget 3 of 3 left, OOM budget 3 of 3 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
}

TEST_F(ControlAttemptsTest, ALostNodeRestartsTheTaskWithoutSpendingTheFailureBudget) {
  AddNode("n1", 1);
  AddNode("n2", 2);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 1\n");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  std::string first = backend_.launches[0].first;
  std::string other = first == "n1" ? "n2" : "n1";
  std::map<std::string, uint64_t> sessions = {{"n1", 1}, {"n2", 2}};
  Running(0);
  for (int lost = 0; lost < 3; ++lost) {  // beyond maxRestarts: node losses are not counted there
    now_ += absl::Seconds(6);
    v1::Heartbeat hb;
    state_->OnHeartbeat(other, hb, now_);
    state_->RunRound(now_);
    ASSERT_EQ(backend_.launches.size(), static_cast<size_t>(lost + 2)) << "moved to the node still heard from";
    EXPECT_EQ(backend_.launches.back().second.max_restarts(), 1) << "the failure budget is whole";
    Running(lost + 1);
    // The lost node's agent comes back on a new stream; the task stays
    // where it moved.
    std::swap(first, other);
    state_->AgentDisconnected(other, sessions[other]);
    sessions[other] = 10 + lost;
    AddNode(other, sessions[other]);
  }
  v1::JobView v = View(job);
  EXPECT_NE(v.state(), v1::JOB_FAILED) << v.reason();
  EXPECT_EQ(Budgets(v.tasks(0)), "failure budget 1 of 1 left, OOM budget 1 of 1 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
  ASSERT_EQ(v.tasks(0).attempts_size(), 3);
  EXPECT_EQ(v.tasks(0).attempts(0).attempt_class(), v1::ATTEMPT_NODE_LOST);
  EXPECT_TRUE(HasEvent(v, "node-loss budget unlimited")) << v.DebugString();
}

TEST_F(ControlAttemptsTest, ASpentNodeLossBudgetFailsTheJobNamingTheClass) {
  v1::JobView v =
      View(SubmitAndLoseItsNode("    restartPolicy: OnFailure\n    maxRestarts: 5\n    restartBudgets: {nodeLost: 0}\n"));
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("(NODE_LOST; node-loss budget 0 of 0 left)"));
  EXPECT_EQ(backend_.launches.size(), 1u) << "not started again";
}

TEST_F(ControlAttemptsTest, UnderRestartPolicyNeverALostNodeFailsTheJob) {
  v1::JobView v = View(SubmitAndLoseItsNode(""));
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("NODE_LOST"));
}

TEST_F(ControlAttemptsTest, ASpentFailureBudgetFailsTheJobNamingTheClass) {
  AddNode("n1", 1);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 1\n");
  state_->RunRound(now_);
  Running(0);
  End(v1::TASK_RESTARTING, 0, v1::ATTEMPT_FAILED, Code(3));
  Running(1);
  End(v1::TASK_FAILED, 1, v1::ATTEMPT_FAILED, Code(3));
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_EQ(v.reason(), "task train-worker-0 failed: exit code 3 after 2 attempts (FAILED; failure budget 0 of 1 left)");
}

TEST_F(ControlAttemptsTest, AStatusWithoutAClassIsClassifiedByItsExit) {
  AddNode("n1", 1);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 1\n    restartBudgets: {oom: 2}\n");
  state_->RunRound(now_);
  Running(0);
  End(v1::TASK_RESTARTING, 0, v1::ATTEMPT_CLASS_UNSPECIFIED, Oom());  // an agent from before classes
  EXPECT_EQ(View(job).tasks(0).attempts(0).attempt_class(), v1::ATTEMPT_OOM_KILLED);
}

TEST_F(ControlAttemptsTest, AKilledJobsAttemptEndsKilled) {
  AddNode("n1", 1);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 1\n");
  state_->RunRound(now_);
  Running(0);
  ASSERT_TRUE(state_->Kill(job, "by its user", now_).ok());
  End(v1::TASK_KILLED, 0, v1::ATTEMPT_CLASS_UNSPECIFIED, Code(-1));
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_KILLED);
  ASSERT_EQ(v.tasks(0).attempts_size(), 1);
  EXPECT_EQ(v.tasks(0).attempts(0).attempt_class(), v1::ATTEMPT_KILLED);
  EXPECT_EQ(Budgets(v.tasks(0)), "failure budget 1 of 1 left, OOM budget 1 of 1 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
}

// A task its live node no longer runs (its end's report lost with a server
// that died) is started again there, in the failure budget: not in the
// node-loss one, unlimited by default, which would restart it forever.
TEST_F(ControlAttemptsTest, ATaskItsLiveNodeNoLongerRunsSpendsTheFailureBudget) {
  AddNode("n1", 1);
  std::string job = Submit("    restartPolicy: OnFailure\n    maxRestarts: 1\n");
  state_->RunRound(now_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_EQ(backend_.launches.size(), static_cast<size_t>(attempt + 1));
    Running(attempt);
    for (int beat = 0; beat < 3; ++beat) {  // heartbeats that no longer list it
      now_ += absl::Seconds(1);
      state_->OnHeartbeat("n1", v1::Heartbeat(), now_);
    }
  }
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_THAT(v.reason(), HasSubstr("(FAILED; failure budget 0 of 1 left)"));
  EXPECT_EQ(backend_.launches.size(), 2u) << "started again once";
  ASSERT_EQ(v.tasks(0).attempts_size(), 2);
  EXPECT_EQ(v.tasks(0).attempts(0).attempt_class(), v1::ATTEMPT_FAILED);
  EXPECT_TRUE(v.tasks(0).attempts(0).restarted());
  EXPECT_EQ(v.tasks(0).attempts(1).attempt_class(), v1::ATTEMPT_FAILED);
  EXPECT_EQ(Budgets(v.tasks(0)), "failure budget 0 of 1 left, OOM budget 1 of 1 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
}

// A job stored by a server from before restarts were counted per class: the
// restarts its task made were spent in maxRestarts, and stay spent after the
// upgrade (its next launch is not given maxRestarts whole again).
TEST_F(ControlAttemptsTest, ARecordFromBeforeClassesKeepsItsRestartsInTheFailureBudget) {
  std::string yaml = "name: old\nreplicas:\n  worker:\n    count: 1\n    resources: {gpus: 1}\n"
                     "    command: [train]\n    restartPolicy: OnFailure\n    maxRestarts: 3\n";
  auto spec = api::LoadJobSpec(yaml, config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto prepared = state_->PrepareSubmit(*spec, now_);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  StoreSnapshot snap;
  snap.jobs.push_back(prepared->rec);
  snap.max_job_id = prepared->rec.id();
  ASSERT_EQ(snap.jobs[0].tasks_size(), 1);
  snap.jobs[0].mutable_tasks(0)->set_restart_count(2);
  snap.jobs[0].mutable_tasks(0)->set_attempt(2);
  ASSERT_FALSE(snap.jobs[0].tasks(0).has_restarts_by_class());
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok()) << sched.status();
  state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  state_->Recover(std::move(snap), {}, now_);
  AddNode("n1", 1);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(backend_.launches[0].second.max_restarts(), 1);
  EXPECT_EQ(Budgets(View("old").tasks(0)),
            "failure budget 1 of 3 left, OOM budget 3 of 3 left, node-loss budget unlimited, GPU-error budget unlimited, preemption budget unlimited");
}

}  // namespace
}  // namespace trainyard::server
