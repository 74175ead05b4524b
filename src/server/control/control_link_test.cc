// The two sides of the agent protocol against each other: the server's
// ControlState and an agent that speaks through the agent's own link rules
// (api::LinkState: what it buffers while no stream is registered, replays
// first on the next, and repeats in heartbeats), not hand-built messages.
// The point: whatever the link repeats, the server applies each end once.
#include <deque>
#include <string>

#include "api/job_spec.h"
#include "api/link_state.h"
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"
#include "server/control/test_status.h"

namespace trainyard::server {
namespace {

constexpr char kControlLinkJob[] = R"(
name: train
replicas:
  worker:
    count: 1
    command: [train]
)";

class ControlLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.jobmaster_enabled = false;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
    Connect();
    auto spec = api::LoadJobSpec(kControlLinkJob, config_.limits);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto prepared = state_->PrepareSubmit(*spec, now_);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    ASSERT_TRUE(state_->AcceptCommitted(*prepared, absl::OkStatus()).ok());
    state_->RunRound(now_);
    ASSERT_EQ(backend_.launches.size(), 1u);
    launch_ = backend_.launches[0].second;
  }

  // A new stream: registered at the server, then the link's replay
  // delivered in order.
  void Connect() {
    ++session_;
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 0), session_, now_).ok());
    link_.Registered();
    for (std::deque<v1::AgentMessage> replay = link_.TakeReplay(); !replay.empty(); replay = link_.TakeReplay()) {
      for (const v1::AgentMessage& m : replay) state_->OnTaskStatus("n1", m.status(), now_);
    }
  }
  void Disconnect() {
    link_.Disconnected();
    state_->AgentDisconnected("n1", session_);
  }
  // The launched task in `state`, as its agent names it.
  v1::TaskStatus StatusOf(v1::TaskState state) const { return testing::StatusOf(launch_, state); }
  // The task's status as the agent reports it; `delivered`: whether the
  // server gets it when the link writes it at once (false: the stream took
  // it and broke, so the server never read it).
  void Report(v1::TaskState state, int exit_code, bool delivered = true) {
    v1::AgentMessage msg;
    *msg.mutable_status() = StatusOf(state);
    if (state != v1::TASK_RUNNING) msg.mutable_status()->mutable_exit()->set_exit_code(exit_code);
    const bool final = state == v1::TASK_SUCCEEDED || state == v1::TASK_FAILED;
    if (link_.OnStatus(msg, final) && delivered) state_->OnTaskStatus("n1", msg.status(), now_);
  }
  // A heartbeat: the task while it runs, then the ends the link repeats.
  void Heartbeat(bool running) {
    now_ += absl::Seconds(1);
    v1::Heartbeat hb;
    if (running) *hb.add_tasks() = StatusOf(v1::TASK_RUNNING);
    link_.AddRecentEnds(session_, now_, &hb);
    state_->OnHeartbeat("n1", hb, now_);
    state_->RunRound(now_);
  }
  v1::JobView Job() { return *state_->Describe("train"); }

  ServerConfig config_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  testing::RecordingBackend backend_;
  std::unique_ptr<ControlState> state_;
  api::LinkState link_{100};
  uint64_t session_ = 0;
  v1::TaskSpec launch_;
};

TEST_F(ControlLinkTest, AnEndWhileTheStreamWasDownIsReplayedThenRepeatedAndCountedOnce) {
  Report(v1::TASK_RUNNING, 0);
  Heartbeat(/*running=*/true);
  ASSERT_EQ(Job().state(), v1::JOB_RUNNING);
  Disconnect();
  now_ += absl::Seconds(2);
  Report(v1::TASK_FAILED, 3);  // the agent gave up on it (its restarts spent): buffered, no stream
  EXPECT_EQ(link_.buffered(), 1u);
  EXPECT_EQ(Job().state(), v1::JOB_RUNNING);
  Connect();  // replayed first
  EXPECT_EQ(link_.buffered(), 0u);
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  const int events = Job().events_size();
  // The link repeats the end in every heartbeat of this stream for 15 s:
  // the server took it once.
  for (int i = 0; i < 20; ++i) Heartbeat(/*running=*/false);
  const v1::JobView job = Job();
  EXPECT_EQ(job.state(), v1::JOB_FAILED);
  ASSERT_EQ(job.tasks_size(), 1);
  EXPECT_EQ(job.tasks(0).last_exit().exit_code(), 3);
  EXPECT_EQ(job.events_size(), events) << "no event for an end already taken";
  EXPECT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(backend_.kills.size(), 0u) << "an ended task is not killed again";
}

TEST_F(ControlLinkTest, AnEndWhoseReportWasLostArrivesInTheNextStreamsHeartbeatsWithItsExitCode) {
  Report(v1::TASK_RUNNING, 0);
  Heartbeat(/*running=*/true);
  // The report was written on a stream that broke before the server read it.
  Report(v1::TASK_SUCCEEDED, 0, /*delivered=*/false);
  Disconnect();
  now_ += absl::Seconds(2);
  Connect();
  EXPECT_EQ(Job().state(), v1::JOB_RUNNING) << "nothing replayed: the write had gone";
  Heartbeat(/*running=*/false);
  EXPECT_EQ(Job().state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(Job().tasks(0).state(), v1::TASK_SUCCEEDED);
  EXPECT_EQ(Job().tasks(0).last_exit().exit_code(), 0);
  for (int i = 0; i < 20; ++i) Heartbeat(/*running=*/false);
  EXPECT_EQ(Job().state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(backend_.launches.size(), 1u);
}

}  // namespace
}  // namespace trainyard::server
