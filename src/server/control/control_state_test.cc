// ControlState driven directly: events in with explicit times, effects
// recorded by a fake backend and read back from the persister. No threads,
// no sockets, no clock, no polling.
#include "server/control/control_state.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

v1::NodeInfo Node(const std::string& name, int gpus, std::map<std::string, std::string> labels = {}) {
  return testing::TestNode(name, gpus, absl::StrCat("10.0.0.", name.substr(1)), labels);
}

class ControlStateTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(core::SchedulerOptions{}); }

  void Make(core::SchedulerOptions options) {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    config_.node_timeout_ms = 5000;
    auto sched = core::Scheduler::Create(options);
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  // Submits and acknowledges a job as durable; returns its name.
  std::string Submit(const std::string& yaml) {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    auto resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    EXPECT_TRUE(resp.ok()) << resp.status();
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

  // A heartbeat from `node` listing the tasks it was sent and still runs.
  void Beat(const std::string& node) {
    v1::Heartbeat hb;
    for (auto& [n, t] : backend_.launches) {
      if (n != node) continue;
      v1::TaskStatus* st = hb.add_tasks();
      st->set_job(t.job());
      st->set_role(t.role());
      st->set_index(t.index());
      st->set_attempt(t.attempt());
      st->set_launch_attempt(t.attempt());
      st->set_state(v1::TASK_RUNNING);
    }
    state_->OnHeartbeat(node, hb, now_);
  }

  v1::JobView View(const std::string& job) {
    auto v = state_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

constexpr char kOneGpu[] = R"(
name: one
replicas:
  worker:
    count: 1
    resources: {gpus: 1}
    command: [train]
)";

TEST_F(ControlStateTest, ARoundPlacesAJobAndLaunchesItThroughTheBackendWithItsEnvironment) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  EXPECT_EQ(backend_.registered, std::vector<std::string>{"n1"});
  std::string job = Submit(kOneGpu);
  EXPECT_EQ(View(job).state(), v1::JOB_QUEUED);
  EXPECT_TRUE(state_->TakeRoundRequest()) << "a submission asks for a round";
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const auto& [node, launch] = backend_.launches[0];
  EXPECT_EQ(node, "n1");
  EXPECT_EQ(launch.env().at("TRAINYARD_JOB"), job);
  EXPECT_EQ(launch.env().at("TRAINYARD_RESTART_COUNT"), "0");
  EXPECT_EQ(launch.env().at("CUDA_VISIBLE_DEVICES").size(), 1u);
  EXPECT_EQ(View(job).state(), v1::JOB_SCHEDULED);
  Status("n1", launch, v1::TASK_RUNNING);
  EXPECT_EQ(View(job).state(), v1::JOB_RUNNING);
  Status("n1", launch, v1::TASK_SUCCEEDED);
  EXPECT_EQ(View(job).state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(View(job).reason(), "all workers completed");
}

TEST_F(ControlStateTest, WhatChangedIsWrittenOnceAndAFailedWriteIsWrittenAgain) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  std::string job = Submit(kOneGpu);
  state_->RunRound(now_);
  std::optional<Persister::Write> w = state_->TakeWrite();
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(w->jobs, ::testing::ElementsAre(job));
  EXPECT_THAT(w->nodes, ::testing::ElementsAre("n1"));
  EXPECT_FALSE(state_->TakeWrite().has_value()) << "one write in flight at a time";
  Status("n1", backend_.launches[0].second, v1::TASK_RUNNING);  // changes while it is in flight
  state_->WriteDone(*w, absl::UnavailableError("disk full"), /*stopping=*/false);
  EXPECT_EQ(state_->persister().last_error().message(), "disk full");
  std::optional<Persister::Write> again = state_->TakeWrite();
  ASSERT_TRUE(again.has_value());
  EXPECT_THAT(again->jobs, ::testing::ElementsAre(job)) << "the failed write's job goes again";
  EXPECT_THAT(again->nodes, ::testing::ElementsAre("n1"));
  state_->WriteDone(*again, absl::OkStatus(), false);
  EXPECT_TRUE(state_->persister().last_error().ok());
  EXPECT_FALSE(state_->TakeWrite().has_value());
}

TEST_F(ControlStateTest, ALostNodesTaskMovesOnlyToANodeItsSelectorMatches) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8, {{"zone", "a"}}), 1, now_).ok());
  ASSERT_TRUE(state_->RegisterAgent(Node("n2", 8, {{"zone", "b"}}), 2, now_).ok());
  ASSERT_TRUE(state_->RegisterAgent(Node("n3", 8, {{"zone", "a"}}), 3, now_).ok());
  std::string job = Submit(R"(
name: sel
nodeSelector: {zone: a}
replicas:
  worker:
    count: 1
    restartPolicy: OnFailure
    maxRestarts: 3
    resources: {gpus: 4}
    command: [train]
)");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  std::string first = backend_.launches[0].first;
  ASSERT_NE(first, "n2");
  std::string other = first == "n1" ? "n3" : "n1";
  now_ += absl::Seconds(6);  // past the timeout; the others are heard from
  Beat("n2");
  Beat(other);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[1].first, other) << "zone a only";
  v1::JobView v = View(job);
  EXPECT_EQ(v.tasks(0).node(), other);
  EXPECT_EQ(v.tasks(0).restarts(), 1);
  EXPECT_EQ(backend_.launches[1].second.env().at("TRAINYARD_RESTART_COUNT"), "1");
  // Its event names the attempt its log has, and the log hub learns where
  // each attempt ran: attempt 0 stays readable on the node it left.
  bool named = false;
  for (const auto& e : v.events()) named = named || absl::StrContains(e.text(), "(attempt 1)");
  EXPECT_TRUE(named) << v.DebugString();
  absl::StatusOr<JobLogPlaces> places = state_->LogPlaces(job);
  ASSERT_TRUE(places.ok());
  EXPECT_EQ(places->tasks[0].NodeOf(0), first);
  EXPECT_EQ(places->tasks[0].NodeOf(1), other);
  EXPECT_EQ(places->node_states.at(first), "LOST");
}

TEST_F(ControlStateTest, ALostTaskThatOnlyItsNamedNodeMayRunGoesBackToTheQueue) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  ASSERT_TRUE(state_->RegisterAgent(Node("n2", 8), 2, now_).ok());
  std::string job = Submit(R"(
name: pinned
nodeName: n1
replicas:
  worker:
    count: 1
    restartPolicy: OnFailure
    resources: {gpus: 1}
    command: [train]
)");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  ASSERT_EQ(backend_.launches[0].first, "n1");
  now_ += absl::Seconds(6);
  Beat("n2");
  state_->RunRound(now_);
  EXPECT_EQ(backend_.launches.size(), 1u) << "never moved to n2";
  v1::JobView v = View(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_THAT(v.reason(), HasSubstr("node n1 is not in the cluster")) << "the pending reason names the node";
  ASSERT_GE(v.events_size(), 1);
  EXPECT_THAT(v.events(v.events_size() - 1).text(), HasSubstr("was lost with node n1"));
}

TEST_F(ControlStateTest, AServerThatStalledDoesNotDeclareItsNodesLost) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  Submit(kOneGpu);
  state_->RunRound(now_);
  now_ += absl::Seconds(20);  // the server was stopped; the agent kept beating
  state_->ExcuseStall(absl::Seconds(20));
  state_->RunRound(now_);
  ASSERT_EQ(state_->ListNodes().size(), 1u);
  EXPECT_EQ(state_->ListNodes()[0].info().state(), v1::NODE_READY);
  EXPECT_EQ(backend_.launches.size(), 1u) << "nothing relaunched";
  now_ += absl::Seconds(6);  // but a node silent since is lost
  state_->RunRound(now_);
  EXPECT_EQ(state_->ListNodes()[0].info().state(), v1::NODE_LOST);
}

TEST_F(ControlStateTest, WhileTheDoorsAreSaturatedSilenceIsExcusedButNeverBeyondThreeTimeouts) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  Submit(kOneGpu);
  state_->RunRound(now_);
  // 12 s without a heartbeat read, every moment of it with connections
  // refused at the server's doors: more than the 5 s timeout, not lost.
  for (int i = 0; i < 3; ++i) {
    now_ += absl::Seconds(4);
    state_->ExcuseOverload(absl::Seconds(4), now_);
    state_->RunRound(now_);
  }
  EXPECT_EQ(state_->ListNodes()[0].info().state(), v1::NODE_READY);
  EXPECT_EQ(backend_.launches.size(), 1u) << "nothing relaunched";
  // But a flood that never ends does not hide a node gone for three
  // timeouts (15 s).
  now_ += absl::Seconds(4);
  state_->ExcuseOverload(absl::Seconds(4), now_);
  state_->RunRound(now_);
  EXPECT_EQ(state_->ListNodes()[0].info().state(), v1::NODE_LOST);
}

TEST_F(ControlStateTest, ANodeThatRegistersAgainWithASmallerSpecIsScheduledByTheNewOne) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  state_->AgentDisconnected("n1", 1);
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 2), 2, now_).ok());
  std::vector<v1::NodeView> nodes = state_->ListNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].free_gpu_mask(), 0b11u) << "two GPUs now, not eight";
  std::string job = Submit(R"(
name: big
replicas:
  worker:
    count: 1
    resources: {gpus: 4}
    command: [train]
)");
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.launches.empty()) << "not placed beyond the node's real capacity";
  EXPECT_EQ(View(job).state(), v1::JOB_QUEUED);
}

TEST_F(ControlStateTest, ARunningTaskIsKeptWhenItsNodeRegistersAgainWithANewSpecThatHoldsIt) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  std::string job = Submit(kOneGpu);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  uint64_t mask = backend_.launches[0].second.allocation().gpu_mask();
  state_->AgentDisconnected("n1", 1);
  v1::NodeInfo more = Node("n1", 8);
  more.mutable_capacity()->set_memory_mb(131072);
  ASSERT_TRUE(state_->RegisterAgent(more, 2, now_).ok());
  std::vector<v1::NodeView> nodes = state_->ListNodes();
  EXPECT_EQ(nodes[0].free_gpu_mask(), 0xffu & ~mask) << "its GPU stays taken";
  EXPECT_EQ(nodes[0].free_memory_mb(), 131072 - View(job).tasks(0).memory_mb());
  EXPECT_NE(View(job).state(), v1::JOB_FAILED);
}

TEST_F(ControlStateTest, AnotherConnectionCannotTakeALiveNodesName) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  absl::Status st = state_->RegisterAgent(Node("n1", 8), 2, now_);
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(st.message(), HasSubstr("already in use"));
  state_->AgentDisconnected("n1", 2);  // the refused one closing changes nothing
  EXPECT_TRUE(state_->LogPlaces("x").status().code() == absl::StatusCode::kNotFound);
  state_->AgentDisconnected("n1", 1);
  EXPECT_TRUE(state_->RegisterAgent(Node("n1", 8), 3, now_).ok()) << "a restarting agent gets its name back";
}

// Running counts every unfinished job past the queue (scheduled included).
std::pair<int, int> RunningAndPending(const ControlState& state) {
  v1::ListQueuesResponse queues = state.ListQueues();
  EXPECT_EQ(queues.queues_size(), 1);
  if (queues.queues_size() != 1) return {-1, -1};
  return {queues.queues(0).running_jobs(), queues.queues(0).pending_jobs()};
}

TEST_F(ControlStateTest, AQueuesUseCountsAShareAsItsThousandths) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  Submit(kOneGpu);
  Submit(absl::StrReplaceAll(kOneGpu, {{"name: one", "name: quarters"}, {"count: 1", "count: 3"},
                                       {"gpus: 1", "gpus: 0.25"}}));
  state_->RunRound(now_);
  v1::ListQueuesResponse queues = state_->ListQueues();
  ASSERT_EQ(queues.queues_size(), 1);
  EXPECT_EQ(queues.queues(0).used().gpus(), 1) << "whole GPUs";
  EXPECT_EQ(queues.queues(0).used().gpu_milli(), 1750) << "one GPU and three 0.25 shares";
}

TEST_F(ControlStateTest, AQueuesViewCountsItsUnfinishedJobsAsTheyMoveAndAfterARestart) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 1), 1, now_).ok());
  std::string one = Submit(kOneGpu);
  std::string two = Submit(absl::StrReplaceAll(kOneGpu, {{"name: one", "name: two"}}));
  EXPECT_EQ(RunningAndPending(*state_), std::make_pair(0, 2));
  state_->RunRound(now_);
  EXPECT_EQ(RunningAndPending(*state_), std::make_pair(1, 1)) << "one GPU: one job placed";
  ASSERT_EQ(backend_.launches.size(), 1u);
  const v1::TaskSpec first = backend_.launches[0].second;
  Status("n1", first, v1::TASK_RUNNING);
  Status("n1", first, v1::TASK_SUCCEEDED);
  EXPECT_EQ(RunningAndPending(*state_), std::make_pair(0, 1)) << "a finished job leaves the counts";
  state_->RunRound(now_);
  EXPECT_EQ(RunningAndPending(*state_), std::make_pair(1, 0));
  ASSERT_TRUE(state_->Kill(two, "", now_).ok());
  EXPECT_EQ(RunningAndPending(*state_), std::make_pair(0, 0));

  // After a restart: the unfinished jobs the store holds are counted, the
  // finished ones are not.
  auto spec = api::LoadJobSpec(absl::StrReplaceAll(kOneGpu, {{"name: one", "name: three"}}), config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto queued = state_->PrepareSubmit(*spec, now_);
  ASSERT_TRUE(queued.ok()) << queued.status();
  v1::JobRecord finished = queued->rec;
  finished.set_name("four");
  finished.set_state(v1::JOB_SUCCEEDED);
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok()) << sched.status();
  ControlState restarted(config_, std::move(*sched), &backend_, now_);
  StoreSnapshot snap;
  snap.jobs = {queued->rec};
  restarted.Recover(snap, {finished}, now_);
  EXPECT_EQ(RunningAndPending(restarted), std::make_pair(0, 1));
}

TEST_F(ControlStateTest, KillStopsRunningTasksAndFreesTheirGpusWhenTheyEnd) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  std::string job = Submit(kOneGpu);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const v1::TaskSpec launch = backend_.launches[0].second;
  Status("n1", launch, v1::TASK_RUNNING);
  auto st = state_->Kill(job, "", now_);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, v1::JOB_KILLED);
  ASSERT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(backend_.kills[0].first, "n1");
  EXPECT_EQ(backend_.kills[0].second.reason(), "killed by the user");
  EXPECT_NE(state_->ListNodes()[0].free_gpu_mask(), 0xffu) << "held until the agent confirms";
  Status("n1", launch, v1::TASK_KILLED);
  EXPECT_EQ(state_->ListNodes()[0].free_gpu_mask(), 0xffu);
  EXPECT_EQ(state_->Kill("nope", "", now_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ControlStateTest, AReplacedJobMastersVerdictIsRefused) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  std::string job = Submit(kOneGpu);
  v1::JobOutcomeRequest req;
  req.set_job(job);
  req.set_state(v1::JOB_RUNNING);
  EXPECT_EQ(state_->ReportOutcome(req, now_).code(), absl::StatusCode::kInvalidArgument);
  req.set_state(v1::JOB_FAILED);
  req.set_reason("worker 0 ERROR: missed 5 pings");
  EXPECT_TRUE(state_->ReportOutcome(req, now_).ok());
  EXPECT_EQ(View(job).state(), v1::JOB_FAILED);
  EXPECT_EQ(View(job).reason(), "worker 0 ERROR: missed 5 pings");
}

}  // namespace
}  // namespace trainyard::server

namespace trainyard::server {
namespace {

TEST_F(ControlStateTest, AFreshClustersQueuesShowItsGpusBeforeAnyJob) {
  ViewStore views;
  state_->PublishNodesAndQueues(&views, now_);
  EXPECT_EQ(views.Queues()->cluster().gpus(), 0);
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  state_->PublishNodesAndQueues(&views, now_);
  EXPECT_EQ(views.Queues()->cluster().gpus(), 8) << "no job event needed for the cluster's size";
  state_->AgentDisconnected("n1", 1);
  ASSERT_TRUE(state_->RegisterAgent(Node("n2", 4), 2, now_).ok());
  state_->PublishNodesAndQueues(&views, now_);
  EXPECT_GE(views.Queues()->cluster().gpus(), 4);
}

TEST_F(ControlStateTest, ANodesPublishedViewIsBuiltAgainOnlyWhenItChanged) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  ASSERT_TRUE(state_->RegisterAgent(Node("n2", 8), 2, now_).ok());
  ViewStore views;
  state_->PublishNodesAndQueues(&views, now_);
  ViewStore::NodesPtr before = views.Nodes();
  ASSERT_EQ(before->size(), 2u);
  std::string job = Submit(kOneGpu);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const std::string placed_on = backend_.launches[0].first;
  state_->PublishNodesAndQueues(&views, now_);
  ViewStore::NodesPtr after = views.Nodes();
  ASSERT_EQ(after->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const v1::NodeView& n = *(*after)[i].view;
    if (n.info().name() == placed_on) {
      EXPECT_NE((*after)[i].view.get(), (*before)[i].view.get()) << "the node that took the task is built again";
      EXPECT_EQ(n.free_gpu_mask(), 0xffu & ~backend_.launches[0].second.allocation().gpu_mask());
      ASSERT_EQ(n.tasks_size(), 1);
      EXPECT_EQ(n.tasks(0), View(job).tasks(0).name());
    } else {
      EXPECT_EQ((*after)[i].view.get(), (*before)[i].view.get()) << "the other node's view is shared, not rebuilt";
      EXPECT_EQ(n.free_gpu_mask(), 0xffu);
    }
  }
}

}  // namespace
}  // namespace trainyard::server

namespace trainyard::server {
namespace {

TEST_F(ControlStateTest, HeartbeatTimesAloneArePublishedAtMostOnceASecond) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  ViewStore views;
  state_->PublishNodesAndQueues(&views, now_);
  ViewStore::NodesPtr first = views.Nodes();
  v1::Heartbeat hb;
  state_->OnHeartbeat("n1", hb, now_ + absl::Milliseconds(100));
  state_->PublishNodesAndQueues(&views, now_ + absl::Milliseconds(100));
  EXPECT_EQ(views.Nodes().get(), first.get()) << "a heartbeat alone is not published within the second";
  state_->PublishNodesAndQueues(&views, now_ + absl::Milliseconds(1000));
  ASSERT_NE(views.Nodes().get(), first.get());
  EXPECT_EQ((*views.Nodes())[0].Full().last_heartbeat_unix_ms(), absl::ToUnixMillis(now_ + absl::Milliseconds(100)));
  EXPECT_EQ((*views.Nodes())[0].view.get(), (*first)[0].view.get()) << "a new heartbeat time alone builds no view";
  // Anything else a node shows goes out at once.
  ViewStore::NodesPtr second = views.Nodes();
  std::string job = Submit(kOneGpu);
  state_->RunRound(now_ + absl::Milliseconds(1001));
  state_->PublishNodesAndQueues(&views, now_ + absl::Milliseconds(1001));
  ASSERT_NE(views.Nodes().get(), second.get());
  EXPECT_EQ((*views.Nodes())[0].view->tasks_size(), 1);
}

}  // namespace
}  // namespace trainyard::server

namespace trainyard::server {
namespace {

// A job's change is published on the nodes its tasks are on at once, with
// no sweep over every node (that happens at most once a second).
TEST_F(ControlStateTest, ATaskEndingShowsOnItsNodeAtTheNextPublication) {
  ASSERT_TRUE(state_->RegisterAgent(Node("n1", 8), 1, now_).ok());
  ViewStore views;
  state_->PublishNodesAndQueues(&views, now_);
  std::string job = Submit(kOneGpu);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  state_->PublishNodesAndQueues(&views, now_);
  ASSERT_EQ((*views.Nodes())[0].view->tasks_size(), 1);
  EXPECT_NE((*views.Nodes())[0].view->free_gpu_mask(), 0xffu);
  Status("n1", backend_.launches[0].second, v1::TASK_SUCCEEDED);
  ASSERT_EQ(View(job).state(), v1::JOB_SUCCEEDED);
  state_->PublishNodesAndQueues(&views, now_);
  EXPECT_EQ((*views.Nodes())[0].view->tasks_size(), 0);
  EXPECT_EQ((*views.Nodes())[0].view->free_gpu_mask(), 0xffu);
}

}  // namespace
}  // namespace trainyard::server
