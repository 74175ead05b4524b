// Node administration and node health in the control state, driven
// directly: cordon, drain, remove, a node whose launches fail or whose disk
// is full, a node whose agent found a GPU faulty, and a deleted job's name
// freed.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/test_backend.h"
#include "server/control/control_state.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

constexpr char kControlAdminJob[] = R"(
name: train
replicas:
  worker:
    count: 1
    resources: {gpus: 1}
    command: [train]
    restartPolicy: OnFailure
    maxRestarts: 3
)";

class ControlAdminTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(StoreSnapshot{}); }

  void Make(const StoreSnapshot& snap) {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(snap, {}, now_);
  }

  void Register(const std::string& node, uint64_t session) {
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode(node, 8), session, now_).ok());
  }

  std::string Submit(const std::string& yaml) {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    auto resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    return resp.ok() ? resp->job() : "";
  }

  // The status of the last launch sent, from its node.
  void Status(v1::TaskState s, bool node_fault = false) {
    // Copies: the status may send a new launch, which moves the vector.
    const auto [node, t] = backend_.launches.back();
    v1::TaskStatus st;
    st.set_job(t.job());
    st.set_role(t.role());
    st.set_index(t.index());
    st.set_attempt(t.attempt());
    st.set_state(s);
    st.set_node_fault(node_fault);
    if (node_fault) st.mutable_exit()->set_message("the agent could not start it: cannot write /d/work/hosts");
    state_->OnTaskStatus(node, st, now_);
  }

  v1::TaskView Task(const std::string& job) { return state_->Describe(job)->tasks(0); }
  v1::NodeView NodeOf(const std::string& node) { return *state_->NodeViewOf(node); }
  // The node records of the next write.
  std::vector<v1::NodeRecord> WrittenNodes(std::vector<std::string>* deleted = nullptr) {
    std::vector<v1::NodeRecord> out;
    std::optional<Persister::Write> w = state_->TakeWrite();
    if (!w) return out;
    for (const auto& op : w->batch.ops()) {
      if (auto* put = std::get_if<WriteBatch::PutNodeOp>(&op)) out.push_back(put->node);
      if (auto* del = std::get_if<WriteBatch::DeleteNodeOp>(&op); del && deleted) deleted->push_back(del->name);
    }
    state_->WriteDone(*w, absl::OkStatus(), false);
    return out;
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlAdminTest, ACordonedNodeTakesNoNewTaskAndStaysCordonedAcrossARestart) {
  Register("n1", 1);
  ASSERT_TRUE(state_->Cordon("n1", "bad fan").ok());
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_CORDONED);
  EXPECT_EQ(NodeOf("n1").reason(), "cordoned: bad fan");
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.launches.empty());
  std::vector<v1::NodeRecord> written = WrittenNodes();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_TRUE(written[0].cordoned());

  // A restarted server reads the cordon back; the node registers cordoned.
  StoreSnapshot snap;
  snap.nodes = written;
  Make(snap);
  Register("n1", 2);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_CORDONED);
  job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.launches.empty());
  ASSERT_TRUE(state_->Uncordon("n1").ok());
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(state_->Cordon("n9", "").code(), absl::StatusCode::kNotFound);
}

// What the control state logs is an effect a test reads (SetLogSink): an
// admin's cordon, then the node lost to silence, in that order.
TEST_F(ControlAdminTest, WhatTheControlStateLogsIsAnEffectATestReads) {
  std::vector<std::pair<LogLevel, std::string>> lines;
  state_->SetLogSink([&](LogLevel level, const std::string& line) { lines.emplace_back(level, line); });
  Register("n1", 1);
  ASSERT_TRUE(state_->Cordon("n1", "rack work").ok());
  now_ += absl::Milliseconds(config_.node_timeout_ms) + absl::Seconds(1);
  state_->RunRound(now_);
  std::vector<std::string> said;
  for (const auto& [level, line] : lines) said.push_back(line);
  ASSERT_GE(lines.size(), 3u) << ::testing::PrintToString(said);
  EXPECT_THAT(said[0], HasSubstr("node n1 registered from"));
  EXPECT_EQ(said[1], "node n1 cordoned: cordoned: rack work");
  EXPECT_EQ(lines[1].first, LogLevel::kInfo);
  EXPECT_THAT(said.back(), HasSubstr("node n1 lost: no heartbeat for"));
  EXPECT_EQ(lines.back().first, LogLevel::kWarning);
}

TEST_F(ControlAdminTest, DrainMovesATaskElsewhereWithoutChargingARestart) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  Status(v1::TASK_RUNNING);
  Register("n2", 2);
  absl::StatusOr<int> evicted = state_->Drain("n1", "", now_);
  ASSERT_TRUE(evicted.ok());
  EXPECT_EQ(*evicted, 1);
  ASSERT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(backend_.kills[0].first, "n1");
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_DRAINING);
  Status(v1::TASK_KILLED);  // the task stopped on n1
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[1].first, "n2");
  EXPECT_EQ(Task(job).restarts(), 0);
  EXPECT_EQ(Task(job).node(), "n2");
  EXPECT_EQ(Task(job).state(), v1::TASK_LAUNCHING);
}

TEST_F(ControlAdminTest, DrainRequeuesAJobWhoseTaskMayNotRestart) {
  Register("n1", 1);
  std::string never = kControlAdminJob;
  never.replace(never.find("OnFailure"), 9, "Never");
  std::string job = Submit(never);
  state_->RunRound(now_);
  Status(v1::TASK_RUNNING);
  ASSERT_TRUE(state_->Drain("n1", "maintenance", now_).ok());
  Status(v1::TASK_KILLED);
  EXPECT_EQ(state_->Describe(job)->state(), v1::JOB_QUEUED);
  EXPECT_THAT(state_->Describe(job)->reason(), HasSubstr("stopped because node n1 is drained"));
  Register("n2", 2);
  state_->RunRound(now_);
  EXPECT_EQ(backend_.launches.back().first, "n2");
  EXPECT_EQ(Task(job).restarts(), 0);
}

TEST_F(ControlAdminTest, ANodeWhoseLaunchesFailIsTakenOutAndTheTaskGoesElsewhereUncharged) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  Status(v1::TASK_FAILED, /*node_fault=*/true);
  ASSERT_EQ(backend_.launches.size(), 2u) << "tried again, not failed";
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY) << "one failure is not enough";
  Status(v1::TASK_FAILED, /*node_fault=*/true);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_DEGRADED);
  EXPECT_THAT(NodeOf("n1").reason(), HasSubstr("2 launches in a row failed on it: the agent could not start it"));
  EXPECT_EQ(state_->Describe(job)->state(), v1::JOB_QUEUED) << "no other node can take it";
  Register("n2", 2);
  state_->RunRound(now_);
  EXPECT_EQ(backend_.launches.back().first, "n2");
  Status(v1::TASK_RUNNING);
  EXPECT_EQ(Task(job).restarts(), 0);
  ASSERT_TRUE(state_->Uncordon("n1").ok());
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY) << "an admin puts it back";
}

// A leader that died had launched a task the new one does not count (its
// placement was never written): the agent refuses a launch onto the GPUs it
// holds. That is not the node's fault: the node stays READY, the task goes
// to other GPUs uncharged, and the held GPUs come back once the agent no
// longer runs the stray.
TEST_F(ControlAdminTest, ALaunchRefusedForGpusAStrayTaskHoldsSparesTheNodeAndAvoidsThem) {
  Register("n1", 1);
  v1::Heartbeat strays;
  strays.set_use_unchanged(true);
  v1::TaskStatus* stray = strays.add_tasks();
  stray->set_job("launched-by-a-dead-leader");
  stray->set_role("worker");
  stray->set_index(0);
  stray->set_state(v1::TASK_RUNNING);
  state_->OnHeartbeat("n1", strays, now_);
  ASSERT_EQ(backend_.kills.size(), 1u) << "the stray is told to stop";
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  for (int refusal = 0; refusal < 3; ++refusal) {
    const auto [node, t] = backend_.launches.back();
    const uint64_t held = t.allocation().gpu_mask();
    v1::TaskStatus st;
    st.set_job(t.job());
    st.set_role(t.role());
    st.set_index(t.index());
    st.set_attempt(t.attempt());
    st.set_state(v1::TASK_FAILED);
    st.set_node_fault(true);
    st.set_gpus_held(true);
    st.mutable_exit()->set_message("the agent could not start it: GPUs 0 are held by another task");
    state_->OnTaskStatus(node, st, now_);
    EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY) << "refusal " << refusal;
    EXPECT_EQ(NodeOf("n1").free_gpu_mask() & held, 0u) << "held GPUs out of placement";
    ASSERT_EQ(backend_.launches.size(), static_cast<size_t>(refusal + 2));
    EXPECT_EQ(backend_.launches.back().second.allocation().gpu_mask() & held, 0u) << "placed on other GPUs";
  }
  Status(v1::TASK_RUNNING);
  EXPECT_EQ(Task(job).restarts(), 0) << "uncharged";
  const uint64_t running = backend_.launches.back().second.allocation().gpu_mask();
  // The stray is gone: a heartbeat lists only the job's task. Its GPUs are back.
  v1::Heartbeat clean;
  clean.set_use_unchanged(true);
  v1::TaskStatus* ours = clean.add_tasks();
  *ours = v1::TaskStatus();
  ours->set_job(job);
  ours->set_role("worker");
  ours->set_index(0);
  ours->set_attempt(backend_.launches.back().second.attempt());
  ours->set_job_id(backend_.launches.back().second.job_id());
  ours->set_state(v1::TASK_RUNNING);
  state_->OnHeartbeat("n1", clean, now_);
  EXPECT_EQ(NodeOf("n1").free_gpu_mask(), 0xffu & ~running) << "every GPU but the task's is free again";
}

// With an etcd store a launch waits for the write that holds its placement:
// a leader that dies first leaves no task running that the next one does
// not know of.
TEST_F(ControlAdminTest, ALaunchAfterDurableGoesOutOnlyOnceItsPlacementIsWritten) {
  config_.launch_after_durable = true;
  Make(StoreSnapshot{});
  Register("n1", 1);
  auto write = [&](absl::Status result) {
    std::optional<Persister::Write> w;
    while ((w = state_->TakeWrite())) state_->WriteDone(*w, result, false);
  };
  write(absl::OkStatus());  // the node's record
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.launches.empty()) << "not before its placement is written";
  std::optional<Persister::Write> failed = state_->TakeWrite();
  ASSERT_TRUE(failed.has_value());
  state_->WriteDone(*failed, absl::UnavailableError("etcd is away"), false);
  EXPECT_TRUE(backend_.launches.empty()) << "a failed write launches nothing";
  write(absl::OkStatus());
  ASSERT_EQ(backend_.launches.size(), 1u) << "written again, then launched";
  EXPECT_EQ(backend_.launches[0].second.job(), job);

  // A job killed before its placement is written is never launched.
  std::string second = Submit(absl::StrReplaceAll(kControlAdminJob, {{"name: train", "name: other"}}));
  state_->RunRound(now_);
  ASSERT_TRUE(state_->Kill(second, "", now_).ok());
  write(absl::OkStatus());
  EXPECT_EQ(backend_.launches.size(), 1u);

  // A kill goes out once the job's end is written.
  Status(v1::TASK_RUNNING);
  backend_.kills.clear();
  ASSERT_TRUE(state_->Kill(job, "", now_).ok());
  EXPECT_TRUE(backend_.kills.empty()) << "not before the job's end is written";
  write(absl::OkStatus());
  ASSERT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(backend_.kills[0].second.job(), job);

  // A task whose node is drained before its placement is written is not
  // launched there: orders go in the order they were decided, and a launch
  // of a task leaving its node is dropped.
  std::string third = Submit(absl::StrReplaceAll(kControlAdminJob, {{"name: train", "name: third"}}));
  state_->RunRound(now_);
  ASSERT_TRUE(state_->Drain("n1", "maintenance", now_).ok());
  write(absl::OkStatus());
  for (const auto& [node, launched] : backend_.launches) EXPECT_NE(launched.job(), third) << "launched on a drained node";
}

TEST_F(ControlAdminTest, ANodeShortOfDiskTakesNoTasksUntilItHasRoomAgain) {
  Register("n1", 1);
  v1::Heartbeat hb;
  hb.set_data_free_mb(10);
  state_->OnHeartbeat("n1", hb, now_);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_DEGRADED);
  EXPECT_EQ(NodeOf("n1").reason(), "only 10 MB free in the agent's data dir (below 100 MB)");
  Submit(kControlAdminJob);
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.launches.empty());
  hb.set_data_free_mb(5000);
  state_->OnHeartbeat("n1", hb, now_);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY);
  state_->RunRound(now_);
  EXPECT_EQ(backend_.launches.size(), 1u);
}

TEST_F(ControlAdminTest, OnlyALostNodeIsRemovedAndItsRecordGoes) {
  Register("n1", 1);
  EXPECT_EQ(state_->RemoveNode("n1", now_).code(), absl::StatusCode::kFailedPrecondition);
  state_->AgentDisconnected("n1", 1);
  now_ += absl::Milliseconds(config_.node_timeout_ms + 1000);
  state_->RunRound(now_);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_LOST);
  WrittenNodes();
  ASSERT_TRUE(state_->RemoveNode("n1", now_).ok());
  EXPECT_FALSE(state_->NodeViewOf("n1").has_value());
  std::vector<std::string> deleted;
  WrittenNodes(&deleted);
  EXPECT_EQ(deleted, std::vector<std::string>{"n1"});
}

TEST_F(ControlAdminTest, ADeletedJobsNameIsFreeAndItsRecordIsKeptUnderItsId) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  EXPECT_EQ(state_->DeleteJob(job, now_).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(state_->Kill(job, "", now_).ok());
  absl::StatusOr<v1::DeleteJobResponse> del = state_->DeleteJob(job, now_);
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_EQ(del->kept_as(), absl::StrCat("train#", del->id()));
  std::optional<Persister::Write> w = state_->TakeWrite();
  ASSERT_TRUE(w.has_value());
  bool renamed = false;
  for (const auto& op : w->batch.ops()) {
    if (auto* u = std::get_if<WriteBatch::UpdateJobOp>(&op)) {
      renamed |= u->job.name() == del->kept_as() && u->job.deleted_time_ms() != 0;
    }
  }
  EXPECT_TRUE(renamed);
  EXPECT_EQ(Submit(kControlAdminJob), "train-2") << "taken until the rename is durable";
  state_->ReleaseName(job);
  EXPECT_EQ(Submit(kControlAdminJob), "train");
}

// The published node views are reused while nothing they show changes
// (NodeViewSig); each admin state and the server's own reasons change what
// `nodes` shows, so each must give a new view.
TEST_F(ControlAdminTest, CordonDrainAndDegradedNodesArePublishedAsTheyChange) {
  Register("n1", 1);
  ViewStore::NodesPtr first = state_->PublishedNodes();
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ(state_->PublishedNodes()->at(0).view.get(), first->at(0).view.get()) << "unchanged: the same view is shared";

  ASSERT_TRUE(state_->Cordon("n1", "bad fan").ok());
  ViewStore::NodesPtr cordoned = state_->PublishedNodes();
  EXPECT_NE(cordoned->at(0).view.get(), first->at(0).view.get());
  EXPECT_EQ(cordoned->at(0).view->info().state(), v1::NODE_CORDONED);
  EXPECT_EQ(cordoned->at(0).view->reason(), "cordoned: bad fan");
  EXPECT_TRUE(cordoned->at(0).view->cordoned());

  ASSERT_TRUE(state_->Uncordon("n1").ok());
  ViewStore::NodesPtr back = state_->PublishedNodes();
  EXPECT_EQ(back->at(0).view->info().state(), v1::NODE_READY);
  EXPECT_EQ(back->at(0).view->reason(), "");
  EXPECT_FALSE(back->at(0).view->cordoned());

  ASSERT_TRUE(state_->Drain("n1", "", now_).ok());
  EXPECT_EQ(state_->PublishedNodes()->at(0).view->info().state(), v1::NODE_DRAINING);
  ASSERT_TRUE(state_->Uncordon("n1").ok());

  v1::Heartbeat hb;
  hb.set_data_free_mb(10);
  state_->OnHeartbeat("n1", hb, now_);
  ViewStore::NodesPtr degraded = state_->PublishedNodes();
  EXPECT_EQ(degraded->at(0).view->info().state(), v1::NODE_DEGRADED);
  EXPECT_EQ(degraded->at(0).Full().data_free_mb(), 10) << "published beside the view, as heartbeat times are";
  hb.set_data_free_mb(5000);
  state_->OnHeartbeat("n1", hb, now_);
  ViewStore::NodesPtr roomy = state_->PublishedNodes();
  EXPECT_EQ(roomy->at(0).view->info().state(), v1::NODE_READY);
  hb.set_data_free_mb(4990);  // a heartbeat's new figure alone builds no view
  state_->OnHeartbeat("n1", hb, now_);
  ViewStore::NodesPtr later = state_->PublishedNodes();
  EXPECT_EQ(later->at(0).view.get(), roomy->at(0).view.get());
  EXPECT_EQ(later->at(0).Full().data_free_mb(), 4990);

  // An agent that says it is stopping: its node takes nothing new.
  state_->AgentDraining("n1", "its agent was stopped by signal 15", now_);
  ViewStore::NodesPtr stopping = state_->PublishedNodes();
  EXPECT_EQ(stopping->at(0).view->info().state(), v1::NODE_DRAINING);
  EXPECT_EQ(stopping->at(0).view->reason(), "its agent was stopped by signal 15");
  Submit(kControlAdminJob);
  state_->RunRound(now_);
  EXPECT_TRUE(backend_.launches.empty());
  state_->AgentDisconnected("n1", 1);
  Register("n1", 2);  // the agent is back
  EXPECT_EQ(state_->PublishedNodes()->at(0).view->info().state(), v1::NODE_READY);
  state_->RunRound(now_);
  EXPECT_EQ(backend_.launches.size(), 1u);
}

// DEGRADED is not stored: a restarted server judges the node again from its
// agent's new registration and heartbeats.
TEST_F(ControlAdminTest, ARestartedServerJudgesADegradedNodeAgainFromItsReports) {
  Register("n1", 1);
  Register("n2", 2);
  v1::Heartbeat low;
  low.set_data_free_mb(10);
  state_->OnHeartbeat("n2", low, now_);
  Submit(kControlAdminJob);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.back().first, "n1");
  Status(v1::TASK_FAILED, /*node_fault=*/true);
  Status(v1::TASK_FAILED, /*node_fault=*/true);
  ASSERT_EQ(NodeOf("n1").info().state(), v1::NODE_DEGRADED);
  ASSERT_EQ(NodeOf("n2").info().state(), v1::NODE_DEGRADED);
  std::vector<v1::NodeRecord> written = WrittenNodes();
  for (const v1::NodeRecord& n : written) EXPECT_FALSE(n.cordoned() || n.draining()) << n.info().name();

  StoreSnapshot snap;
  snap.nodes = written;
  Make(snap);
  Register("n1", 3);
  Register("n2", 4);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY) << "its launches are tried again";
  EXPECT_EQ(NodeOf("n2").info().state(), v1::NODE_READY) << "until its first heartbeat";
  state_->OnHeartbeat("n2", low, now_);
  EXPECT_EQ(NodeOf("n2").info().state(), v1::NODE_DEGRADED) << "still short of disk";
}

// A job that reuses a deleted job's name is a new job: its checkpoint dir
// is its own, so it does not resume from the old job's checkpoints.
TEST_F(ControlAdminTest, AJobThatReusesADeletedJobsNameGetsItsOwnCheckpointDir) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  std::string old_dir = backend_.launches[0].second.env().at("TRAINYARD_CHECKPOINT_DIR");
  uint64_t old_id = backend_.launches[0].second.job_id();
  EXPECT_EQ(old_dir, absl::StrCat(config_.checkpoint_root, "/train.", old_id));
  // Moved to another node, the same job resumes from its own directory.
  Status(v1::TASK_RUNNING);
  Register("n2", 2);
  ASSERT_TRUE(state_->Drain("n1", "", now_).ok());
  Status(v1::TASK_KILLED);
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[1].second.env().at("TRAINYARD_CHECKPOINT_DIR"), old_dir);
  Status(v1::TASK_RUNNING);
  Status(v1::TASK_SUCCEEDED);
  ASSERT_EQ(state_->Describe(job)->state(), v1::JOB_SUCCEEDED);
  ASSERT_TRUE(state_->DeleteJob(job, now_).ok());
  state_->ReleaseName(job);
  ASSERT_EQ(Submit(kControlAdminJob), "train");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 3u);
  const v1::TaskSpec& reused = backend_.launches[2].second;
  EXPECT_NE(reused.job_id(), old_id);
  EXPECT_NE(reused.env().at("TRAINYARD_CHECKPOINT_DIR"), old_dir);
  EXPECT_EQ(reused.env().at("TRAINYARD_CHECKPOINT_DIR"), absl::StrCat(config_.checkpoint_root, "/train.", reused.job_id()));
}

// Counts are said in words a person would use: "1 task", not "1 tasks".
TEST_F(ControlAdminTest, AOneTaskJobsEventsSayTaskInTheSingular) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  Status(v1::TASK_RUNNING);
  std::string texts;
  absl::StatusOr<v1::JobView> view = state_->Describe(job);
  ASSERT_TRUE(view.ok()) << view.status();
  for (const v1::JobEvent& e : view->events()) absl::StrAppend(&texts, e.text(), "\n");
  EXPECT_THAT(texts, HasSubstr("(1 task, priority iteration)"));
  EXPECT_THAT(texts, HasSubstr("its task is running"));
  EXPECT_THAT(texts, ::testing::Not(HasSubstr("1 tasks")));
}

// A heartbeat with `fault` (given as changed) from `node`.
v1::Heartbeat FaultBeat(int gpu, int xid, v1::GpuFaultAction action) {
  v1::Heartbeat hb;
  hb.set_use_unchanged(true);
  v1::GpuFault* f = hb.add_gpu_faults();
  f->set_gpu(gpu);
  f->set_xid(xid);
  f->set_action(action);
  f->set_message(absl::StrCat("Xid ", xid, " (test): NVRM: Xid (PCI:0000:0", gpu + 1, ":00): ", xid));
  f->set_time_unix_ms(1'800'000'000'000);
  hb.set_gpu_faults_given(true);
  return hb;
}

TEST_F(ControlAdminTest, AFaultyGpuGoesOutOfServiceAndItsTaskMovesOnItsGpuErrorBudget) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const uint64_t first = backend_.launches[0].second.allocation().gpu_mask();
  const int gpu = __builtin_ctzll(first);
  Status(v1::TASK_RUNNING);
  // A heartbeat that lists the task as running, with the fault.
  v1::Heartbeat hb = FaultBeat(gpu, 48, v1::GPU_FAULT_EXCLUDE_GPU);
  state_->OnHeartbeat("n1", hb, now_);
  ASSERT_EQ(backend_.kills.size(), 1u) << "the task on the faulty GPU is told to stop";
  EXPECT_EQ(backend_.kills[0].first, "n1");
  v1::NodeView node = NodeOf("n1");
  EXPECT_EQ(node.info().state(), v1::NODE_READY) << "one GPU excluded; the node takes work";
  ASSERT_EQ(node.info().gpu_faults_size(), 1);
  EXPECT_EQ(node.info().gpu_faults(0).xid(), 48);
  EXPECT_EQ(node.free_gpu_mask() & first, 0u);

  Status(v1::TASK_KILLED);  // it stopped on the faulty GPU
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[1].first, "n1");
  EXPECT_EQ(backend_.launches[1].second.allocation().gpu_mask() & first, 0u) << "placed on another GPU";
  v1::TaskView t = Task(job);
  EXPECT_EQ(t.state(), v1::TASK_LAUNCHING);
  ASSERT_GE(t.attempts_size(), 1);
  EXPECT_EQ(t.attempts(t.attempts_size() - 1).attempt_class(), v1::ATTEMPT_GPU_ERROR);
  bool shown = false;
  for (const v1::RestartBudgetView& b : t.budgets()) {
    if (b.attempt_class() != v1::ATTEMPT_GPU_ERROR) continue;
    shown = true;
    EXPECT_EQ(b.spent(), 1);
    EXPECT_EQ(b.limit(), -1) << "unlimited by default";
  }
  EXPECT_TRUE(shown);
  // The faulty GPU stays out of service after its task left it.
  EXPECT_EQ(NodeOf("n1").free_gpu_mask() & first, 0u);

  // The agent restarted (after the GPU's reset) knows no fault: the GPU is back.
  state_->AgentDisconnected("n1", 1);
  Register("n1", 2);
  EXPECT_EQ(NodeOf("n1").info().gpu_faults_size(), 0);
  EXPECT_NE(NodeOf("n1").free_gpu_mask() & first, 0u);
}

TEST_F(ControlAdminTest, AGpuFaultThatAsksForARebootDrainsTheNode) {
  Register("n1", 1);
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const int gpu = __builtin_ctzll(backend_.launches[0].second.allocation().gpu_mask());
  Status(v1::TASK_RUNNING);
  Register("n2", 2);
  // Another GPU of the node fell off the bus: the whole node is drained.
  state_->OnHeartbeat("n1", FaultBeat((gpu + 3) % 8, 79, v1::GPU_FAULT_DRAIN_NODE), now_);
  v1::NodeView node = NodeOf("n1");
  EXPECT_EQ(node.info().state(), v1::NODE_DRAINING);
  EXPECT_THAT(node.reason(), HasSubstr("Xid 79"));
  ASSERT_EQ(backend_.kills.size(), 1u);
  Status(v1::TASK_KILLED);
  ASSERT_EQ(backend_.launches.size(), 2u);
  EXPECT_EQ(backend_.launches[1].first, "n2");
  v1::TaskView t = Task(job);
  EXPECT_EQ(t.attempts(t.attempts_size() - 1).attempt_class(), v1::ATTEMPT_GPU_ERROR);
  absl::StatusOr<v1::JobView> view = state_->Describe(job);
  ASSERT_TRUE(view.ok());
  bool told = false;
  for (const v1::JobEvent& e : view->events()) told |= absl::StrContains(e.text(), "is drained for its GPU");
  EXPECT_TRUE(told) << "an event says why the task moved";
}

TEST_F(ControlAdminTest, AGpuErrorBudgetOfNoneFailsTheJobOnItsFirstFaultyGpu) {
  Register("n1", 1);
  std::string job = Submit(std::string(kControlAdminJob) + "    restartBudgets: {gpuError: 0}\n");
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const int gpu = __builtin_ctzll(backend_.launches[0].second.allocation().gpu_mask());
  Status(v1::TASK_RUNNING);
  state_->OnHeartbeat("n1", FaultBeat(gpu, 95, v1::GPU_FAULT_EXCLUDE_GPU), now_);
  Status(v1::TASK_KILLED);
  absl::StatusOr<v1::JobView> view = state_->Describe(job);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->state(), v1::JOB_FAILED);
  EXPECT_THAT(view->reason(), HasSubstr("GPU_ERROR"));
  EXPECT_THAT(view->reason(), HasSubstr("is faulty (Xid 95"));
  EXPECT_EQ(backend_.launches.size(), 1u);
}

TEST_F(ControlAdminTest, CordonedGpusTakeNoTaskKeepTheirCordonAcrossARestartAndAreNamedWhenWrong) {
  Register("n1", 1);
  ASSERT_TRUE(state_->CordonGpus("n1", {0, 1, 2, 3, 4, 5, 6}, true).ok());
  EXPECT_EQ(NodeOf("n1").cordoned_gpus(), 0x7fu);
  EXPECT_EQ(NodeOf("n1").info().state(), v1::NODE_READY) << "the node itself is not cordoned";
  std::string job = Submit(kControlAdminJob);
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(backend_.launches[0].second.allocation().gpu_mask(), 0x80u) << "the only GPU not cordoned";
  absl::Status bad = state_->CordonGpus("n1", {8}, true);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "gpus: 8 is not a GPU of node n1 (it has 8: 0-7)");
  EXPECT_EQ(state_->CordonGpus("n9", {0}, true).code(), absl::StatusCode::kNotFound);

  // A restarted server reads the GPUs' cordon back.
  std::vector<v1::NodeRecord> written = WrittenNodes();
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back().cordoned_gpus(), 0x7fu);
  StoreSnapshot snap;
  snap.nodes = written;
  Make(snap);
  Register("n1", 2);
  EXPECT_EQ(NodeOf("n1").cordoned_gpus(), 0x7fu);
  EXPECT_EQ(NodeOf("n1").free_gpu_mask(), 0x80u);
  ASSERT_TRUE(state_->CordonGpus("n1", {6}, false).ok());
  EXPECT_EQ(NodeOf("n1").free_gpu_mask(), 0xc0u);
  ASSERT_TRUE(state_->Uncordon("n1").ok());
  EXPECT_EQ(NodeOf("n1").cordoned_gpus(), 0u) << "uncordoning the node uncordons its GPUs";
  EXPECT_EQ(NodeOf("n1").free_gpu_mask(), 0xffu);
}

}  // namespace
}  // namespace trainyard::server
