// ControlState under events that arrive in an order a peer or the network
// chose: a node paused (SIGSTOP) past the node timeout while tasks that only
// it may run are there, then back; the same with a server restart while the
// node is away; agents that reconnect twice; statuses of an older attempt.
// Each must be handled (a log line, an event), never abort the server.
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "common/server_list.h"
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

// What a restarted server waits on top of the node timeout for an agent
// to come back (ControlState::CheckNodes).
constexpr absl::Duration kSilentServerGrace =
    absl::Milliseconds(kServerListKeepaliveMs + kServerListKeepaliveTimeoutMs);

using ::testing::HasSubstr;

constexpr char kPinnedThree[] = R"(
name: pinned
nodeName: rn-1
replicas:
  worker:
    count: 3
    restartPolicy: OnFailure
    resources: {gpus: 1}
    command: [train]
)";

class ControlEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 5000;
    state_ = Make();
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  std::unique_ptr<ControlState> Make() {
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    EXPECT_TRUE(sched.ok()) << sched.status();
    return std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
  }

  // Writes what the control state has for the store, as the shell does.
  void Flush() { testing::FlushWrites(*state_, store_); }

  // The server restarts: a new control state from what the store holds.
  void Restart() {
    Flush();
    state_ = Make();
    testing::RecoverFromStore(store_, *state_, now_);
  }

  std::string Submit(const std::string& yaml) {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    WriteBatch create;
    create.CreateJob(prepared->rec, prepared->first_event);
    absl::Status kept = store_.Commit(std::move(create));
    EXPECT_TRUE(kept.ok()) << kept;
    auto resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->job() : "";
  }

  v1::TaskStatus StatusOf(const v1::TaskSpec& t, v1::TaskState s) { return testing::StatusOf(t, s); }

  // Every launch on `node` from `first` on reports `s`.
  void ReportFrom(size_t first, const std::string& node, v1::TaskState s) {
    for (size_t k = first; k < backend_.launches.size(); ++k) {
      if (backend_.launches[k].first == node) state_->OnTaskStatus(node, StatusOf(backend_.launches[k].second, s), now_);
    }
  }

  // A heartbeat from `node` listing `tasks` as running.
  void Beat(const std::string& node, const std::vector<v1::TaskSpec>& tasks = {}) {
    v1::Heartbeat hb;
    for (const v1::TaskSpec& t : tasks) *hb.add_tasks() = StatusOf(t, v1::TASK_RUNNING);
    state_->OnHeartbeat(node, hb, now_);
  }

  std::vector<v1::TaskSpec> LaunchesOn(const std::string& node, size_t first = 0) {
    std::vector<v1::TaskSpec> out;
    for (size_t k = first; k < backend_.launches.size(); ++k) {
      if (backend_.launches[k].first == node) out.push_back(backend_.launches[k].second);
    }
    return out;
  }

  v1::JobView View(const std::string& job) {
    auto v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  int Events(const std::string& job, const std::string& kind) {
    int n = 0;
    v1::JobView v = View(job);
    for (const auto& e : v.events()) n += e.kind() == kind ? 1 : 0;
    return n;
  }

  // The node's free GPUs as `nodes` shows them (-1: unknown node).
  int64_t FreeGpus(const std::string& node) {
    std::optional<v1::NodeView> v = state_->NodeViewOf(node);
    return v ? static_cast<int64_t>(__builtin_popcountll(v->free_gpu_mask())) : -1;
  }

  // Three OnFailure workers that only rn-1 may run, all running there.
  std::string RunPinnedJob() {
    EXPECT_TRUE(state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 1, now_).ok());
    EXPECT_TRUE(state_->RegisterAgent(testing::TestNode("rn-2", 8, "10.0.0.2"), 2, now_).ok());
    std::string job = Submit(kPinnedThree);
    state_->RunRound(now_);
    EXPECT_EQ(LaunchesOn("rn-1").size(), 3u);
    ReportFrom(0, "rn-1", v1::TASK_RUNNING);
    EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
    return job;
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  MemoryStateStore store_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

// The finding of issue 30: `kill -STOP` of rn-1's agent for 8 s aborted the
// server ("already pending"): the first lost task requeued the job, and the
// second tried to requeue it again.
TEST_F(ControlEventsTest, ANodePausedPastTheTimeoutRequeuesItsPinnedJobOnceAndTakesItBackWhenItReturns) {
  std::string job = RunPinnedJob();
  std::vector<v1::TaskSpec> old = LaunchesOn("rn-1");
  now_ += absl::Seconds(6);  // rn-1 paused: its stream stays open, it says nothing
  Beat("rn-2");
  state_->RunRound(now_);
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_THAT(v.reason(), HasSubstr("node rn-1 is not in the cluster"));
  EXPECT_EQ(Events(job, "requeued"), 1) << "requeued once, not once per task";
  for (const auto& t : v.tasks()) EXPECT_EQ(t.state(), v1::TASK_PENDING) << t.role() << t.index();

  // SIGCONT: the same stream speaks again, still running the old attempts.
  now_ += absl::Seconds(2);
  size_t kills = backend_.kills.size();
  size_t launches = backend_.launches.size();
  Beat("rn-1", old);
  EXPECT_EQ(state_->NodeViewOf("rn-1")->info().state(), v1::NODE_READY);
  EXPECT_EQ(backend_.kills.size() - kills, 3u) << "the copies it still runs are stopped";
  state_->RunRound(now_);
  std::vector<v1::TaskSpec> again = LaunchesOn("rn-1", launches);
  ASSERT_EQ(again.size(), 3u) << "the job is placed on rn-1 again";
  for (const v1::TaskSpec& t : again) EXPECT_EQ(t.attempt(), 1) << "a new attempt";
  // A late status of the old attempt changes nothing.
  state_->OnTaskStatus("rn-1", StatusOf(old[0], v1::TASK_FAILED), now_);
  EXPECT_EQ(View(job).state(), v1::JOB_SCHEDULED);
  ReportFrom(launches, "rn-1", v1::TASK_RUNNING);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(FreeGpus("rn-1"), 5) << "three GPUs held, once";
}

// The restarted server aborted again while rn-1 was still away: recovery
// takes the lost node's tasks through the same path.
TEST_F(ControlEventsTest, AServerRestartedWhileThePausedNodeIsAwayRequeuesItsJobOnce) {
  std::string job = RunPinnedJob();
  std::vector<v1::TaskSpec> old = LaunchesOn("rn-1");
  now_ += absl::Seconds(1);
  Restart();
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-2", 8, "10.0.0.2"), 3, now_).ok());
  // rn-1 never comes back within the timeout and the grace for an agent
  // whose server went silent.
  const absl::Duration away = absl::Seconds(6) + kSilentServerGrace;
  now_ += away;
  Beat("rn-2");
  state_->RunRound(now_);
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_EQ(Events(job, "requeued"), 1);
  // And a second restart while it is still away finds the job queued.
  Restart();
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-2", 8, "10.0.0.2"), 4, now_).ok());
  now_ += away;
  Beat("rn-2");
  state_->RunRound(now_);
  EXPECT_EQ(View(job).state(), v1::JOB_QUEUED);

  // rn-1's agent registers again with the old attempts still running.
  size_t kills = backend_.kills.size();
  size_t launches = backend_.launches.size();
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 5, now_).ok());
  Beat("rn-1", old);
  EXPECT_EQ(backend_.kills.size() - kills, 3u);
  state_->RunRound(now_);
  ASSERT_EQ(LaunchesOn("rn-1", launches).size(), 3u);
  ReportFrom(launches, "rn-1", v1::TASK_RUNNING);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(FreeGpus("rn-1"), 5);
}

// A restart while the node is away, and the node back before the timeout:
// its tasks are adopted where they run, nothing relaunched.
TEST_F(ControlEventsTest, ANodeBackBeforeTheTimeoutAfterARestartKeepsItsTasks) {
  std::string job = RunPinnedJob();
  std::vector<v1::TaskSpec> old = LaunchesOn("rn-1");
  Restart();
  size_t launches = backend_.launches.size();
  now_ += absl::Seconds(3);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 7, now_).ok());
  Beat("rn-1", old);
  now_ += absl::Seconds(6);
  Beat("rn-1", old);
  state_->RunRound(now_);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(backend_.launches.size(), launches) << "nothing launched again";
  EXPECT_EQ(FreeGpus("rn-1"), 5);
}

// After a restart, a node that comes back with fewer GPUs than its tasks
// were given: those tasks cannot be adopted there, and are ended as lost
// rather than left RUNNING on GPUs the node does not have.
TEST_F(ControlEventsTest, ANodeBackAfterARestartWithFewerGpusEndsTheTasksItCannotHold) {
  std::string job = RunPinnedJob();
  Restart();
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-1", 2, "10.0.0.1"), 7, now_).ok());
  v1::JobView v = View(job);
  int ended = 0;
  for (const auto& t : v.tasks()) {
    if (t.state() == v1::TASK_RUNNING) {
      EXPECT_LT(t.gpu_mask(), 4u) << t.name() << " runs on a GPU rn-1 has";
    } else {
      ++ended;
      EXPECT_THAT(t.last_exit().message(), HasSubstr("no longer fits node rn-1")) << t.name();
    }
  }
  EXPECT_GE(ended, 1) << "three 1-GPU tasks cannot all be on a 2-GPU node";
  EXPECT_EQ(v.state(), v1::JOB_FAILED) << "a task lost with its node's GPUs fails the job as a lost task does";
}

// An agent that reconnects twice quickly: the second stream's registration
// is refused while the first is open, and the first's close after the
// second took over changes nothing.
TEST_F(ControlEventsTest, AnAgentReconnectingTwiceKeepsOneSessionAndItsTasks) {
  std::string job = RunPinnedJob();
  std::vector<v1::TaskSpec> old = LaunchesOn("rn-1");
  size_t told = backend_.sessions.size();
  EXPECT_EQ(state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 11, now_).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(backend_.sessions.size(), told) << "a refused registration moves nothing: orders go on to stream 1";
  state_->AgentDisconnected("rn-1", 1);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 12, now_).ok());
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 12, now_).ok()) << "again, same stream";
  EXPECT_THAT(std::vector<uint64_t>(backend_.sessions.begin() + told, backend_.sessions.end()),
              ::testing::ElementsAre(12u, 12u))
      << "the backend sends the node's orders to the stream that registered it";
  state_->AgentDisconnected("rn-1", 11);  // the refused stream closes late
  Beat("rn-1", old);
  state_->RunRound(now_);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
  EXPECT_EQ(FreeGpus("rn-1"), 5);
  size_t kills = backend_.kills.size();
  ASSERT_TRUE(state_->Kill(job, "", now_).ok());
  EXPECT_EQ(backend_.kills.size() - kills, 3u) << "the node is connected: its kills are sent";
}

// A registration the scheduler refuses leaves no session behind: the
// agent's next try is not told its name is in use by itself.
TEST_F(ControlEventsTest, ARefusedRegistrationLeavesTheNodeFreeToRegisterAgain) {
  v1::NodeInfo bad = testing::TestNode("rn-1", 8, "10.0.0.1");
  bad.mutable_capacity()->set_gpu_mask(uint64_t{1} << 40);  // a GPU its topology does not have
  EXPECT_FALSE(state_->RegisterAgent(bad, 21, now_).ok());
  EXPECT_THAT(backend_.sessions, ::testing::Not(::testing::Contains(21u))) << "the backend is never told of it";
  absl::Status again = state_->RegisterAgent(testing::TestNode("rn-1", 8, "10.0.0.1"), 22, now_);
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(backend_.sessions.back(), 22u);
}

}  // namespace
}  // namespace trainyard::server
