// JobManager against the in-memory store, a fake clock and fake agent links:
// what a user would see through describe / jobs as agents report.
#include "server/job_manager.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/wait_until.h"
#include "server/agent_streams.h"
#include "server/control/test_node.h"
#include "server/control/test_status.h"
#include "api/job_spec.h"
#include "api/roles.h"
#include "store/memory_state_store.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

class FakeLink : public AgentLink {
 public:
  void Send(v1::ServerMessage msg) override { sent.push_back(std::move(msg)); }
  std::vector<v1::TaskSpec> Launches() const {
    std::vector<v1::TaskSpec> out;
    for (const auto& m : sent) {
      if (m.has_launch()) out.push_back(m.launch());
    }
    return out;
  }
  std::vector<v1::KillTask> Kills() const {
    std::vector<v1::KillTask> out;
    for (const auto& m : sent) {
      if (m.has_kill()) out.push_back(m.kill());
    }
    return out;
  }
  std::vector<v1::ServerMessage> sent;
};

v1::NodeInfo JobManagerNode(const std::string& name, int gpus = 8) { return testing::TestNode(name, gpus); }

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.kill_grace_ms = 100;
    config_.jobmaster_enabled = false;  // the master task has its own test
    config_.node_timeout_ms = 5000;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    manager_ = std::make_unique<JobManager>(config_, &store_, std::move(*sched), &streams_, &clock_);
    ASSERT_TRUE(manager_->Recover().ok());
  }

  // A manager that starts a job master for the jobs whose tasks talk to one.
  void WithJobMasters() {
    config_.jobmaster_enabled = true;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    manager_ = std::make_unique<JobManager>(config_, &store_, std::move(*sched), &streams_, &clock_);
    ASSERT_TRUE(manager_->Recover().ok());
  }

  std::string Submit(const std::string& yaml) {
    auto spec = api::LoadJobSpec(yaml, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto r = manager_->Submit(*spec);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->job() : "";
  }

  // What the agent sends for launch `t` (testing::StatusOf, as the control
  // state's tests send it).
  void Report(const std::string& node, const v1::TaskSpec& t, v1::TaskState state, int exit_code = 0) {
    v1::TaskStatus st = testing::StatusOf(t, state);
    st.mutable_exit()->set_exit_code(exit_code);
    manager_->OnTaskStatus(node, st);
  }

  v1::JobView Describe(const std::string& job) {
    auto v = manager_->Describe(job);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : v1::JobView();
  }

  // The store answers writes on a thread of its own: waits (with a deadline)
  // until the stored record of `job` is in `state`.
  bool WaitForStored(const std::string& job, v1::JobState state) {
    return WaitUntil([&] {
      auto rec = store_.GetJobByName(job);
      return rec.ok() && rec->state() == state;
    });
  }

  // `link`'s stream opens (the agents' backend numbers it) and registers
  // `info`, as the agent service does.
  absl::Status Connect(const v1::NodeInfo& info, FakeLink* link) {
    return manager_->RegisterAgent(info, streams_.Open(link));
  }
  // `link`'s stream closes (Open gives an open link's own session again).
  void Disconnect(const std::string& node, FakeLink* link) {
    manager_->AgentDisconnected(node, streams_.Open(link));
    streams_.Close(link);
  }

  ServerConfig config_;
  MemoryStateStore store_;
  FakeClock clock_{absl::FromUnixSeconds(1700000000)};
  AgentStreams streams_;  // the backend: outlives the manager
  std::unique_ptr<JobManager> manager_;
};

constexpr char kPsJob[] = R"(
name: train
framework: tensorflow
replicas:
  ps:
    count: 1
    command: [sleep, "1000"]
  worker:
    count: 2
    resources: {gpus: 2}
    command: [./train]
)";

TEST_F(JobManagerTest, PlacesLaunchesWithFrameworkEnvAndSucceedsWhenWorkersComplete) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string job = Submit(kPsJob);
  manager_->ScheduleNowForTest();
  auto launches = link.Launches();
  ASSERT_EQ(launches.size(), 3u);
  for (const auto& t : launches) {
    EXPECT_EQ(t.env().at("TRAINYARD_JOB"), "train");
    EXPECT_THAT(t.env().at("TF_CONFIG"), HasSubstr("\"ps\":[\"127.0.0.1:"));
    EXPECT_EQ(t.allocation().ports_size(), 1);
    if (t.role() == "worker") {
      EXPECT_EQ(__builtin_popcountll(t.allocation().gpu_mask()), 2);
      EXPECT_EQ(t.env().at("CUDA_VISIBLE_DEVICES").size(), 3u);  // "a,b"
    }
  }
  EXPECT_EQ(Describe(job).state(), v1::JOB_SCHEDULED);
  for (const auto& t : launches) Report("n1", t, v1::TASK_RUNNING);
  EXPECT_EQ(Describe(job).state(), v1::JOB_RUNNING);
  for (const auto& t : launches) {
    if (t.role() == "worker") Report("n1", t, v1::TASK_SUCCEEDED);
  }
  v1::JobView v = Describe(job);
  EXPECT_EQ(v.state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(v.reason(), "all workers completed");
  auto kills = link.Kills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].role(), "ps");
}

// An agent's samples are kept for the tasks the server placed on its node
// only: a node cannot speak for another's tasks, or for another job that
// once had the same name.
TEST_F(JobManagerTest, TaskResourcesAreKeptOnlyFromTheNodeThatRunsTheTask) {
  FakeLink link1, link2;
  ASSERT_TRUE(Connect(JobManagerNode("n1", 2), &link1).ok());
  ASSERT_TRUE(Connect(JobManagerNode("n2", 2), &link2).ok());
  std::string job = Submit("name: r\nreplicas:\n  worker:\n    count: 1\n    resources: {gpus: 2}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  std::vector<v1::TaskSpec> on1 = link1.Launches(), on2 = link2.Launches();
  ASSERT_EQ(on1.size() + on2.size(), 1u);
  const v1::TaskSpec t = on1.empty() ? on2[0] : on1[0];
  const std::string node = on1.empty() ? "n2" : "n1", other = on1.empty() ? "n1" : "n2";
  Report(node, t, v1::TASK_RUNNING);
  auto report = [&](uint64_t job_id, int32_t cpu) {
    v1::TaskResourceReport r;
    v1::TaskResources* s = r.add_tasks();
    s->set_job(job);
    s->set_role("worker");
    s->set_index(0);
    s->set_job_id(job_id);
    s->mutable_sample()->set_cpu_milli(cpu);
    s->mutable_sample()->set_memory_bytes(64 << 20);
    return r;
  };
  const uint64_t id = Describe(job).id();
  manager_->OnTaskResources(other, report(id, 111));   // not its task
  manager_->OnTaskResources(node, report(id + 1, 222));  // another job's id
  manager_->OnTaskResources(node, report(id, 333));
  v1::JobResourcesRequest req;
  req.set_job(job);
  absl::StatusOr<v1::JobResourcesResponse> r = manager_->JobResources(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tasks_size(), 1);
  ASSERT_EQ(r->tasks(0).samples_size(), 1);
  EXPECT_EQ(r->tasks(0).samples(0).cpu_milli(), 333);
  EXPECT_EQ(r->tasks(0).node(), node);
  EXPECT_EQ(r->tasks(0).gpu_milli(), 2000);
  EXPECT_EQ(r->sample_interval_ms(), config_.task_sample_interval_ms);
  req.set_job("nope");
  EXPECT_EQ(manager_->JobResources(req).status().code(), absl::StatusCode::kNotFound);
}

// Schedules through the shell: a run is submitted when due, as its
// owner's job named NAME-UNIXSECONDS; the next is skipped while it runs
// (skip) or kills it (replace); a run by hand answers with its job; a
// restarted server reads the schedules and their runs back.
TEST_F(JobManagerTest, SchedulesSubmitRunsAsTheirOwnersJobsAndSurviveARestart) {
  auto create = [&](const std::string& name, v1::ConcurrencyPolicy policy) {
    v1::ScheduleRecord rec;
    rec.set_name(name);
    rec.set_user("ana");
    rec.set_cron("* * * * *");
    rec.set_concurrency(policy);
    std::vector<std::string> problems =
        api::ParseJobSpecYamlInto("name: x\nreplicas:\n  worker:\n    command: [sleep, '600']\n", rec.mutable_spec());
    EXPECT_TRUE(problems.empty());
    return manager_->CreateSchedule(rec, {});
  };
  auto schedule = [&](const std::string& name) {
    std::vector<v1::ScheduleView> v = manager_->ListSchedules(name);
    return v.empty() ? v1::ScheduleView() : v[0];
  };
  // Runs until each schedule's newest run is recorded (the store answers
  // submissions on its own thread; the next turn records them).
  auto turn_until = [&](const std::string& name, int runs) {
    return WaitUntil([&] {
      manager_->ScheduleNowForTest();
      return schedule(name).schedule().runs_size() >= runs;
    });
  };
  absl::StatusOr<v1::ScheduleView> skip = create("every-minute", v1::CONCURRENCY_SKIP);
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ(skip->schedule().user(), "ana");
  EXPECT_EQ(skip->schedule().spec().queue(), "default") << "named at creation: who may act on it is decided by it";
  ASSERT_TRUE(create("replacing", v1::CONCURRENCY_REPLACE).ok());
  EXPECT_EQ(create("every-minute", v1::CONCURRENCY_SKIP).status().code(), absl::StatusCode::kAlreadyExists);
  const int64_t first_due = skip->next_run_unix_ms();
  ASSERT_GT(first_due, absl::ToUnixMillis(clock_.Now()));

  clock_.Advance(absl::Milliseconds(first_due) - (clock_.Now() - absl::UnixEpoch()) + absl::Milliseconds(1));
  ASSERT_TRUE(turn_until("every-minute", 1));
  ASSERT_TRUE(turn_until("replacing", 1));
  v1::ScheduleRun run = schedule("every-minute").schedule().runs(0);
  EXPECT_EQ(run.outcome(), "submitted") << run.message();
  EXPECT_EQ(run.job(), "every-minute-" + std::to_string(first_due / 1000));
  EXPECT_EQ(Describe(run.job()).user(), "ana");
  const std::string replaced = schedule("replacing").schedule().runs(0).job();
  ASSERT_FALSE(replaced.empty());
  EXPECT_THAT(schedule("every-minute").live_jobs(), ::testing::ElementsAre(run.job()));

  // A minute on, both first runs still queued (no node): skipped; replaced.
  clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(turn_until("every-minute", 2));
  ASSERT_TRUE(turn_until("replacing", 2));
  v1::ScheduleRun skipped = schedule("every-minute").schedule().runs(1);
  EXPECT_EQ(skipped.outcome(), "skipped");
  EXPECT_EQ(skipped.job(), "");
  EXPECT_THAT(skipped.message(), HasSubstr(run.job() + " has not ended (concurrency: skip)"));
  v1::ScheduleRun next = schedule("replacing").schedule().runs(1);
  EXPECT_EQ(next.outcome(), "submitted");
  EXPECT_THAT(next.message(), HasSubstr("replaced " + replaced));
  EXPECT_EQ(Describe(replaced).state(), v1::JOB_KILLED);

  // Paused: nothing comes due; by hand: a run now, answered with its job.
  ASSERT_TRUE(manager_->UpdateSchedule("every-minute", v1::SCHEDULE_PAUSE).ok());
  clock_.Advance(absl::Minutes(3));
  manager_->ScheduleNowForTest();
  EXPECT_EQ(schedule("every-minute").schedule().runs_size(), 2);
  EXPECT_EQ(schedule("every-minute").next_run_unix_ms(), 0);
  absl::StatusOr<v1::ScheduleView> by_hand = manager_->UpdateSchedule("every-minute", v1::SCHEDULE_RUN);
  ASSERT_TRUE(by_hand.ok()) << by_hand.status();
  const v1::ScheduleRun& hand = *by_hand->schedule().runs().rbegin();
  EXPECT_TRUE(hand.by_hand());
  EXPECT_EQ(hand.outcome(), "submitted");
  EXPECT_EQ(hand.job(), "every-minute-" + std::to_string(absl::ToUnixSeconds(clock_.Now())));
  EXPECT_EQ(manager_->UpdateSchedule("nosuch", v1::SCHEDULE_PAUSE).status().code(), absl::StatusCode::kNotFound);

  // A restart reads them back: paused, with their runs.
  ASSERT_TRUE(manager_->UpdateSchedule("replacing", v1::SCHEDULE_DELETE).ok());
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok());
  manager_ = std::make_unique<JobManager>(config_, &store_, std::move(*sched), &streams_, &clock_);
  ASSERT_TRUE(manager_->Recover().ok());
  manager_->ScheduleNowForTest();
  v1::ScheduleView back = schedule("every-minute");
  EXPECT_TRUE(back.schedule().paused());
  EXPECT_EQ(back.schedule().runs_size(), 3);
  EXPECT_TRUE(manager_->ListSchedules("replacing").empty()) << "deleted";
  EXPECT_EQ(Describe(replaced).state(), v1::JOB_KILLED) << "its jobs stay";
}

// A spec no run could submit is refused at creation, naming the field.
TEST_F(JobManagerTest, AScheduleOfASpecNoRunCouldSubmitIsRefused) {
  v1::ScheduleRecord rec;
  rec.set_name("bad");
  rec.set_user("ana");
  rec.set_cron("@daily");
  std::vector<std::string> problems =
      api::ParseJobSpecYamlInto("name: x\nreplicas:\n  worker:\n    count: -1\n    command: [x]\n", rec.mutable_spec());
  absl::StatusOr<v1::ScheduleView> v = manager_->CreateSchedule(rec, problems);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("replicas.worker.count"));
  rec.clear_spec();
  problems = api::ParseJobSpecYamlInto(
      "name: x\nreplicas:\n  worker:\n    command: [x]\n    env: {TOKEN: {secret: s3cret}}\n", rec.mutable_spec());
  v = manager_->CreateSchedule(rec, problems);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("replicas.worker.env.TOKEN: a schedule's spec cannot"));
  EXPECT_TRUE(manager_->ListSchedules("").empty());
}

TEST_F(JobManagerTest, ListJobsAnswersInPagesThatTogetherHoldEveryJobOnce) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::vector<std::string> submitted;
  for (int i = 0; i < 7; ++i) {
    submitted.push_back(Submit(absl::StrCat("name: paged-", i, "\nreplicas:\n  worker:\n    count: 3\n"
                                            "    command: [sleep, \"100\"]\n")));
  }
  manager_->ScheduleNowForTest();
  for (const auto& t : link.Launches()) {
    if (t.job() == "paged-0" && t.index() < 2) Report("n1", t, v1::TASK_RUNNING);
  }
  v1::ListJobsRequest req;
  req.set_page_size(3);
  req.set_without_tasks(true);
  std::vector<std::string> listed;
  std::vector<int> page_sizes;
  do {
    absl::StatusOr<v1::ListJobsResponse> page = manager_->ListJobs(req);
    ASSERT_TRUE(page.ok()) << page.status();
    page_sizes.push_back(page->jobs_size());
    for (const auto& j : page->jobs()) {
      listed.push_back(j.name());
      EXPECT_EQ(j.tasks_size(), 0) << j.name();
      EXPECT_EQ(j.task_count(), 3) << j.name();
      EXPECT_EQ(j.running_task_count(), j.name() == "paged-0" ? 2 : 0) << j.name();
    }
    req.set_page_token(page->next_page_token());
  } while (!req.page_token().empty());
  EXPECT_EQ(listed, submitted);
  EXPECT_EQ(page_sizes, (std::vector<int>{3, 3, 1}));

  // Without without_tasks each job comes whole.
  v1::ListJobsRequest whole;
  absl::StatusOr<v1::ListJobsResponse> all = manager_->ListJobs(whole);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->jobs_size(), 7);
  EXPECT_EQ(all->jobs(0).tasks_size(), 3);
  EXPECT_EQ(all->next_page_token(), "");

  v1::ListJobsRequest bad;
  bad.set_page_token("not-a-token");
  absl::StatusOr<v1::ListJobsResponse> refused = manager_->ListJobs(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("page_token: 'not-a-token'"));
  bad.set_page_token("");
  bad.set_page_size(-1);
  EXPECT_THAT(manager_->ListJobs(bad).status().message(), HasSubstr("page_size"));
}

TEST_F(JobManagerTest, FailedTaskFailsTheJobNamingTaskExitAndAttempts) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string job = Submit("name: one\nreplicas:\n  worker:\n    restartPolicy: OnFailure\n    maxRestarts: 2\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  auto t = link.Launches().at(0);
  Report("n1", t, v1::TASK_RUNNING);
  v1::TaskStatus restarting = testing::StatusOf(t, v1::TASK_RESTARTING);
  restarting.mutable_exit()->set_exit_code(3);
  manager_->OnTaskStatus("n1", restarting);
  restarting.set_attempt(1);
  manager_->OnTaskStatus("n1", restarting);
  v1::TaskStatus failed = restarting;
  failed.set_attempt(2);
  failed.set_state(v1::TASK_FAILED);
  manager_->OnTaskStatus("n1", failed);
  v1::JobView v = Describe(job);
  EXPECT_EQ(v.state(), v1::JOB_FAILED);
  EXPECT_EQ(v.reason(), "task one-worker-0 failed: exit code 3 after 3 attempts (FAILED; failure budget 0 of 2 left)");
  EXPECT_EQ(v.tasks(0).restarts(), 2);
}

TEST_F(JobManagerTest, KillStopsRunningTasks) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string job = Submit("name: k\nreplicas:\n  worker:\n    count: 2\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  for (const auto& t : link.Launches()) Report("n1", t, v1::TASK_RUNNING);
  auto state = manager_->Kill(job, "");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, v1::JOB_KILLED);
  EXPECT_EQ(link.Kills().size(), 2u);
  EXPECT_FALSE(manager_->Kill("nope", "").ok());
}

TEST_F(JobManagerTest, PendingJobCarriesReasonAndStartsWhenRoomAppears) {
  FakeLink link1;
  ASSERT_TRUE(Connect(JobManagerNode("n1", 2), &link1).ok());
  std::string job = Submit("name: big\nreplicas:\n  worker:\n    resources: {gpus: 4}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  v1::JobView v = Describe(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_FALSE(v.reason().empty());
  EXPECT_NE(v.reason(), "waiting for the scheduler");
  FakeLink link2;
  ASSERT_TRUE(Connect(JobManagerNode("n2", 8), &link2).ok());
  manager_->ScheduleNowForTest();
  EXPECT_EQ(Describe(job).state(), v1::JOB_SCHEDULED);
  EXPECT_EQ(link2.Launches().size(), 1u);
}

TEST_F(JobManagerTest, DuplicateNodeNameIsRefusedWhileTheFirstIsConnected) {
  FakeLink a, b;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &a).ok());
  absl::Status st = Connect(JobManagerNode("n1"), &b);
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(st.message(), HasSubstr("node name 'n1' is already in use"));
  Disconnect("n1", &a);
  EXPECT_TRUE(Connect(JobManagerNode("n1"), &b).ok());
}

TEST_F(JobManagerTest, InterleavedSwitchesPlaceAPairOnOneSwitch) {
  FakeLink link;
  v1::NodeInfo n = JobManagerNode("n1");
  n.mutable_topology()->clear_switches();
  for (uint64_t sw : {0x05, 0x0a, 0x50, 0xa0}) n.mutable_topology()->add_switches(sw);
  n.mutable_topology()->clear_sockets();
  for (uint64_t so : {0x0f, 0xf0}) n.mutable_topology()->add_sockets(so);
  ASSERT_TRUE(Connect(n, &link).ok());
  Submit("name: pair\nreplicas:\n  worker:\n    resources: {gpus: 2}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 1u);
  EXPECT_EQ(link.Launches()[0].env().at("CUDA_VISIBLE_DEVICES"), "0,2");
}

TEST_F(JobManagerTest, AnInvalidTopologyIsRefusedAtRegistration) {
  FakeLink link;
  v1::NodeInfo n = JobManagerNode("n1");
  n.mutable_topology()->set_switches(2, 0x18);  // GPUs 3-4, where 4-5 was
  absl::Status st = Connect(n, &link);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "register.topology.switches[2] '3-4': GPU 3 is also in switches[1] '2-3'");
  EXPECT_TRUE(manager_->ListNodes().empty());
}

TEST_F(JobManagerTest, LostNodeMovesItsTaskToAnotherNodeWithTheSameWorkerId) {
  FakeLink link1, link2;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link1).ok());
  std::string job = Submit("name: mv\nreplicas:\n  worker:\n    restartPolicy: OnFailure\n    resources: {gpus: 1}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link1.Launches().size(), 1u);
  auto first = link1.Launches()[0];
  Report("n1", first, v1::TASK_RUNNING);
  ASSERT_TRUE(Connect(JobManagerNode("n2"), &link2).ok());
  clock_.Advance(absl::Seconds(3));
  manager_->OnHeartbeat("n2", v1::Heartbeat());
  clock_.Advance(absl::Seconds(3));  // n1 silent for 6 s > 5 s
  manager_->OnHeartbeat("n2", v1::Heartbeat());
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link2.Launches().size(), 1u);
  auto moved = link2.Launches()[0];
  EXPECT_EQ(moved.worker_id(), first.worker_id());
  EXPECT_EQ(moved.attempt(), 1);
  v1::JobView v = Describe(job);
  EXPECT_EQ(v.tasks(0).node(), "n2");
  bool event = false;
  for (const auto& e : v.events()) event |= e.kind() == "task_moved";
  EXPECT_TRUE(event);
}

TEST_F(JobManagerTest, BadSpecIsRefusedAndNothingIsStored) {
  v1::JobSpec spec;
  spec.set_name("Bad Name");
  auto r = manager_->Submit(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("name: 'Bad Name'"));
  EXPECT_TRUE(manager_->ListJobs(true).empty());
  auto q = api::LoadJobSpec("name: q\nqueue: nosuch\nreplicas:\n  worker: {command: [x]}\n", config_.limits);
  ASSERT_TRUE(q.ok());
  auto r2 = manager_->Submit(*q);
  ASSERT_FALSE(r2.ok());
  EXPECT_THAT(r2.status().message(), HasSubstr("queue: 'nosuch' is not a leaf queue"));
}

TEST_F(JobManagerTest, AnArrayWhoseCopiesOfTheSpecWeighTooMuchIsRefusedBeforeAnyIsMade) {
  auto spec = api::LoadJobSpec("name: heavy\narray: 0-999\nreplicas:\n  worker: {command: [x]}\n", config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->mutable_replicas(0)->add_command(std::string(80 << 10, 'a'));  // 80 KiB x 1000 elements
  auto r = manager_->Submit(*spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("bytes one array may hold"));
  EXPECT_TRUE(manager_->ListJobs(true).empty());
}

TEST_F(JobManagerTest, AnArrayTooBigForOneEtcdTransactionIsRefusedNamingTheLimitAndWhatFits) {
  config_.store = "etcd://127.0.0.1:2379";  // the limit is the config's; the store here is in memory
  config_.etcd_max_txn_ops = 128;
  manager_.reset();
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok()) << sched.status();
  manager_ = std::make_unique<JobManager>(config_, &store_, std::move(*sched), &streams_, &clock_);
  ASSERT_TRUE(manager_->Recover().ok());
  auto spec = api::LoadJobSpec("name: wide\narray: 0-99\nreplicas:\n  worker: {command: [x]}\n", config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = manager_->Submit(*spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("etcdMaxTxnOps"));
  EXPECT_THAT(r.status().message(), HasSubstr("at most 42 elements"));  // 3 keys each
  EXPECT_TRUE(manager_->ListJobs(true).empty());
  spec->set_array("0-41");
  auto fits = manager_->Submit(*spec);
  EXPECT_TRUE(fits.ok()) << fits.status();
}

// A heartbeat that lists `running` as the agent lists its tasks.
v1::Heartbeat Beat(const std::vector<v1::TaskSpec>& running) {
  v1::Heartbeat hb;
  for (const auto& t : running) *hb.add_tasks() = testing::StatusOf(t, v1::TASK_RUNNING);
  return hb;
}

TEST_F(JobManagerTest, ATaskItsAgentNoLongerRunsIsStartedAgainOrFailsPerPolicy) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string again = Submit("name: again\nreplicas:\n  worker:\n    restartPolicy: OnFailure\n    maxRestarts: 2\n"
                             "    resources: {gpus: 1}\n    command: [x]\n");
  std::string never = Submit("name: never\nreplicas:\n  worker:\n    resources: {gpus: 1}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 2u);
  for (const auto& t : link.Launches()) Report("n1", t, v1::TASK_RUNNING);
  // Listed, then left out of heartbeats (its end lost with a crashed server).
  manager_->OnHeartbeat("n1", Beat(link.Launches()));
  for (int i = 0; i < 3; ++i) manager_->OnHeartbeat("n1", Beat({}));
  ASSERT_EQ(link.Launches().size(), 3u);
  v1::TaskSpec relaunched = link.Launches()[2];
  EXPECT_EQ(relaunched.job(), again);
  EXPECT_EQ(relaunched.attempt(), 1);
  v1::JobView v = Describe(again);
  EXPECT_EQ(v.tasks(0).state(), v1::TASK_LAUNCHING);
  EXPECT_EQ(v.tasks(0).restarts(), 1);
  EXPECT_THAT(v.events(v.events_size() - 1).text(), HasSubstr("node n1 no longer runs it"));
  v1::JobView n = Describe(never);
  EXPECT_EQ(n.state(), v1::JOB_FAILED);
  EXPECT_THAT(n.reason(), HasSubstr("no longer runs it"));
  // Two heartbeats without the relaunched task are not yet three.
  for (int i = 0; i < 2; ++i) manager_->OnHeartbeat("n1", Beat({}));
  manager_->OnHeartbeat("n1", Beat({relaunched}));
  EXPECT_EQ(link.Launches().size(), 3u);
}

TEST_F(JobManagerTest, AnEndRepeatedInAHeartbeatIsAppliedAndALaunchNeverShownIsSentAgain) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string done = Submit("name: done\nreplicas:\n  worker: {command: [x]}\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 1u);
  v1::TaskSpec t = link.Launches()[0];
  Report("n1", t, v1::TASK_RUNNING);
  // Its SUCCEEDED report was lost; the agent repeats the end in heartbeats.
  v1::Heartbeat hb = Beat({t});
  hb.mutable_tasks(0)->set_state(v1::TASK_SUCCEEDED);
  manager_->OnHeartbeat("n1", hb);
  EXPECT_EQ(Describe(done).state(), v1::JOB_SUCCEEDED);

  // A launch the agent never shows (lost with a server that died) is not
  // taken as a task that ended: it is sent again, same attempt.
  std::string slow = Submit("name: slow\nreplicas:\n  worker: {command: [x]}\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 2u);
  for (int i = 0; i < 9; ++i) manager_->OnHeartbeat("n1", Beat({}));
  EXPECT_EQ(link.Launches().size(), 2u);
  manager_->OnHeartbeat("n1", Beat({}));
  ASSERT_EQ(link.Launches().size(), 3u);
  EXPECT_EQ(link.Launches()[2].job(), slow);
  EXPECT_EQ(link.Launches()[2].attempt(), link.Launches()[1].attempt());
  EXPECT_EQ(Describe(slow).tasks(0).state(), v1::TASK_LAUNCHING);
}

TEST_F(JobManagerTest, AKilledJobWhoseLaunchNeverArrivedFreesItsGpus) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string lost = Submit("name: lost\nreplicas:\n  worker:\n    resources: {gpus: 8}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 1u);  // ...which the agent never got
  ASSERT_TRUE(manager_->Kill(lost, "").ok());
  std::string next = Submit("name: next\nreplicas:\n  worker:\n    resources: {gpus: 8}\n    command: [x]\n");
  for (int i = 0; i < 3; ++i) manager_->OnHeartbeat("n1", Beat({}));
  manager_->ScheduleNowForTest();
  EXPECT_EQ(Describe(lost).tasks(0).state(), v1::TASK_KILLED);
  ASSERT_EQ(link.Launches().size(), 2u) << "the GPUs of the killed job stayed held";
  EXPECT_EQ(link.Launches()[1].job(), next);
}

TEST_F(JobManagerTest, StatusesOfAnOlderLaunchOnTheSameNodeDoNotEndTheNewOne) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string job = Submit("name: again\nreplicas:\n  worker:\n    restartPolicy: OnFailure\n    maxRestarts: 5\n"
                           "    resources: {gpus: 1}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 1u);
  v1::TaskSpec first = link.Launches()[0];
  auto status = [&](int attempt, int launch, v1::TaskState state) {
    v1::TaskStatus st;
    st.set_job(job);
    st.set_role("worker");
    st.set_index(0);
    st.set_attempt(attempt);
    st.set_launch_attempt(launch);
    st.set_state(state);
    manager_->OnTaskStatus("n1", st);
  };
  status(0, 0, v1::TASK_RUNNING);
  status(1, 0, v1::TASK_RUNNING);  // the agent restarted it: attempt 1 of launch 0
  // The node falls silent; nowhere else to go: back in the queue, then placed
  // on the same node again when it is heard from.
  clock_.Advance(absl::Seconds(6));
  manager_->ScheduleNowForTest();
  ASSERT_EQ(Describe(job).state(), v1::JOB_QUEUED);
  manager_->OnHeartbeat("n1", Beat({}));
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 2u);
  int launch = link.Launches()[1].attempt();
  ASSERT_GE(launch, 2);
  // The old copy, restarted once more by its agent, ends at that same attempt number.
  status(launch, 0, v1::TASK_KILLED);
  EXPECT_EQ(Describe(job).state(), v1::JOB_SCHEDULED);
  EXPECT_EQ(Describe(job).tasks(0).state(), v1::TASK_LAUNCHING);
  status(launch, launch, v1::TASK_RUNNING);
  EXPECT_EQ(Describe(job).tasks(0).state(), v1::TASK_RUNNING);
}

// A node whose agent comes back with fewer GPUs than its task holds: its
// new stream hears the answer to its registration first (the agent takes
// anything else first as a refusal), then the kill of the task that no
// longer fits, which the server ends as lost.
TEST_F(JobManagerTest, ANodeBackWithFewerGpusHearsItsAnswerFirstThenTheKillOfTheTaskItCannotHold) {
  FakeLink first;
  ASSERT_TRUE(Connect(JobManagerNode("n1", 8), &first).ok());
  std::string job = Submit("name: big\nreplicas:\n  worker:\n    resources: {gpus: 8}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(first.Launches().size(), 1u);
  Report("n1", first.Launches()[0], v1::TASK_RUNNING);
  Disconnect("n1", &first);

  FakeLink second;
  ASSERT_TRUE(Connect(JobManagerNode("n1", 2), &second).ok());
  ASSERT_FALSE(second.sent.empty());
  EXPECT_TRUE(second.sent[0].has_registered()) << "the answer comes first";
  ASSERT_EQ(second.Kills().size(), 1u) << "the task the node cannot hold is killed there";
  EXPECT_EQ(second.Kills()[0].job(), job);
  EXPECT_THAT(second.Kills()[0].reason(), HasSubstr("no longer fits node n1"));
  EXPECT_EQ(Describe(job).tasks(0).state(), v1::TASK_FAILED);
}

TEST_F(JobManagerTest, AKilledJobStillStoppingWhenTheServerDiedHoldsItsGpusUntilItsTasksStop) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string old = Submit("name: old\nreplicas:\n  worker:\n    resources: {gpus: 8}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 1u);
  v1::TaskSpec task = link.Launches()[0];
  Report("n1", task, v1::TASK_RUNNING);
  ASSERT_TRUE(manager_->Kill(old, "").ok());  // its agent has not confirmed the stop...
  manager_->Stop();                           // ...when the server dies
  manager_.reset();

  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  AgentStreams streams2;  // the new server's
  JobManager second(config_, &store_, std::move(*sched), &streams2, &clock_);
  ASSERT_TRUE(second.Recover().ok());
  FakeLink link2;
  ASSERT_TRUE(second.RegisterAgent(JobManagerNode("n1"), streams2.Open(&link2)).ok());
  auto spec = api::LoadJobSpec("name: next\nreplicas:\n  worker:\n    resources: {gpus: 8}\n    command: [x]\n", config_.limits);
  ASSERT_TRUE(spec.ok());
  auto next = second.Submit(*spec);
  ASSERT_TRUE(next.ok());
  second.ScheduleNowForTest();
  EXPECT_TRUE(link2.Launches().empty()) << "the GPUs of the stopping task were given again";
  // The agent still runs it: the kill goes again; once it stops, the GPUs are free.
  second.OnHeartbeat("n1", Beat({task}));
  ASSERT_EQ(link2.Kills().size(), 1u);
  EXPECT_EQ(link2.Kills()[0].job(), old);
  second.OnTaskStatus("n1", testing::StatusOf(task, v1::TASK_KILLED));
  second.ScheduleNowForTest();
  ASSERT_EQ(link2.Launches().size(), 1u);
  EXPECT_EQ(link2.Launches()[0].job(), next->job());
  auto v = second.Describe(old);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state(), v1::JOB_KILLED);
  EXPECT_EQ(v->tasks(0).state(), v1::TASK_KILLED);
}

TEST_F(JobManagerTest, KillAnswersOnceDurableAndARefusedWriteIsRetriedWhenTheStoreTakesWritesAgain) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string job = Submit("name: k\nreplicas:\n  worker: {command: [x]}\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 1u);
  store_.SetWriteErrorForTest(absl::UnavailableError("disk full"));
  auto killed = manager_->Kill(job, "");
  ASSERT_FALSE(killed.ok());
  EXPECT_EQ(killed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(killed.status().message(), HasSubstr("cannot record it: disk full"));
  EXPECT_EQ(Describe(job).state(), v1::JOB_KILLED);  // the tasks are being stopped all the same
  auto stored = store_.GetJobByName(job);
  ASSERT_TRUE(stored.ok());
  EXPECT_NE(stored->state(), v1::JOB_KILLED);
  store_.SetWriteErrorForTest(absl::OkStatus());
  manager_->ScheduleNowForTest();  // the next write carries the job again
  EXPECT_TRUE(WaitForStored(job, v1::JOB_KILLED));
}

TEST_F(JobManagerTest, TasksGetTheJobMastersAddressInTheirEnvironmentAndInAFile) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  auto spec = api::LoadJobSpec("name: jm\nreplicas:\n  worker: {count: 2, command: [x]}\n", config_.limits);
  ASSERT_TRUE(spec.ok());
  spec->set_job_master_address("10.0.0.9:4000");  // a master in the submitting client
  ASSERT_TRUE(manager_->Submit(*spec).ok());
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 2u);
  for (const auto& t : link.Launches()) {
    EXPECT_EQ(t.env().at("TRAINYARD_JOB_MASTER"), "10.0.0.9:4000");
    EXPECT_EQ(t.env().at("TRAINYARD_JOB_MASTER_FILE"), "${TRAINYARD_TASK_DIR}/jobmaster");
    EXPECT_EQ(t.files().at("jobmaster"), "10.0.0.9:4000\n");
  }
}

TEST_F(JobManagerTest, OnlyTasksThatTalkToAJobMasterAreGivenTheJobsSecret) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  manager_->SetJobCredentials([](uint64_t id) { return absl::StrCat("token-", id); },
                              [](uint64_t id) { return absl::StrCat("secret-", id); });
  auto with = api::LoadJobSpec("name: with\nreplicas:\n  worker: {count: 2, command: [x]}\n", config_.limits);
  ASSERT_TRUE(with.ok());
  with->set_job_master_address("10.0.0.9:4000");  // a master in the submitting client
  auto with_id = manager_->Submit(*with);
  ASSERT_TRUE(with_id.ok());
  std::string without = Submit("name: without\nreplicas:\n  worker: {command: [x]}\n");
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 3u);
  for (const auto& t : link.Launches()) {
    if (t.job() == "with") {
      EXPECT_EQ(t.env().at("TRAINYARD_JOB_SECRET"), absl::StrCat("secret-", with_id->job_id()));
    } else {
      EXPECT_EQ(t.job(), without);
      EXPECT_EQ(t.env().count("TRAINYARD_JOB_SECRET"), 0u) << "a job without a master has no use for its secret";
    }
    EXPECT_EQ(t.env().count("TRAINYARD_JOB_TOKEN"), 0u) << "only a job master task holds the job's credential";
  }
}

// `trainyard rsh` presents it to the rank hosts of the job's workers.
TEST_F(JobManagerTest, EveryTaskOfAnMpiJobGetsTheJobsSecretAndTrainyardRsh) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  manager_->SetJobCredentials([](uint64_t id) { return absl::StrCat("token-", id); },
                              [](uint64_t id) { return absl::StrCat("secret-", id); });
  auto spec = api::LoadJobSpec(
      "name: mpi\nframework: mpi\nreplicas:\n  launcher: {command: [x]}\n  worker: {count: 2, command: [x]}\n",
      config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = manager_->Submit(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 3u);  // no job master: an MPI job has none
  for (const auto& t : link.Launches()) {
    EXPECT_EQ(t.env().at("TRAINYARD_JOB_SECRET"), absl::StrCat("secret-", r->job_id())) << t.role();
    EXPECT_EQ(t.env().at("OMPI_MCA_plm_rsh_agent"), "${TRAINYARD_BIN} rsh") << t.role();
    EXPECT_EQ(t.env().count("TRAINYARD_JOB_TOKEN"), 0u) << t.role();
    // A worker's port is its rank host's.
    EXPECT_EQ(t.allocation().ports_size(), t.role() == "worker" ? 1 : 0) << t.role();
  }
}

TEST_F(JobManagerTest, AServerStartedMasterGetsTheJobsCredentialAndSecretAndItsWorkersTheSecret) {
  ASSERT_NO_FATAL_FAILURE(WithJobMasters());
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  manager_->SetJobCredentials([](uint64_t id) { return absl::StrCat("token-", id); },
                              [](uint64_t id) { return absl::StrCat("secret-", id); });
  auto spec = api::LoadJobSpec("name: m\nreplicas:\n  worker: {count: 2, command: [x]}\n", config_.limits);
  ASSERT_TRUE(spec.ok());
  auto r = manager_->Submit(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  manager_->ScheduleNowForTest();
  ASSERT_EQ(link.Launches().size(), 3u);  // the master and two workers
  int masters = 0;
  for (const auto& t : link.Launches()) {
    EXPECT_EQ(t.env().at("TRAINYARD_JOB_SECRET"), absl::StrCat("secret-", r->job_id())) << t.role();
    if (api::IsJobMasterRole(t.role())) {
      ++masters;
      EXPECT_EQ(t.env().at("TRAINYARD_JOB_TOKEN"), absl::StrCat("token-", r->job_id()));
    } else {
      EXPECT_EQ(t.env().count("TRAINYARD_JOB_MASTER"), 1u);
      EXPECT_EQ(t.env().count("TRAINYARD_JOB_TOKEN"), 0u);
    }
  }
  EXPECT_EQ(masters, 1);
}

TEST_F(JobManagerTest, WithTheLoopRunningEverySubmissionIsAnsweredOnceItsJobIsPlacedAndShown) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1", 16), &link).ok());
  manager_->Start();
  constexpr int kJobs = 12;
  absl::Mutex mu;
  int answered = 0;
  std::vector<std::string> problems;
  for (int i = 0; i < kJobs; ++i) {
    auto spec = api::LoadJobSpec(absl::StrCat("name: j", i, "\nreplicas:\n  worker: {command: [x], resources: {gpus: 1}}\n"),
                                 config_.limits);
    ASSERT_TRUE(spec.ok()) << spec.status();
    manager_->SubmitAsync(*spec, [&, i](absl::StatusOr<v1::SubmitResponse> r) {
      // Answered without the manager's lock, its job already in the views
      // (describe right after the answer sees it) and placed by the round
      // that took it in.
      std::string problem;
      std::shared_ptr<const v1::JobView> view = r.ok() ? manager_->JobSummary(r->job()) : nullptr;
      if (!r.ok()) {
        problem = absl::StrCat("j", i, ": ", r.status().ToString());
      } else if (!view) {
        problem = absl::StrCat(r->job(), ": answered before its view was published");
      } else if (view->state() == v1::JOB_QUEUED) {
        problem = absl::StrCat(r->job(), ": answered while still queued on a node with room");
      }
      absl::MutexLock lock(&mu);
      if (!problem.empty()) problems.push_back(problem);
      ++answered;
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answered == kJobs; };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(10))) << answered << " of " << kJobs;
  }
  manager_->Stop();  // the loop's thread is joined: its launches can be read
  EXPECT_THAT(problems, ::testing::IsEmpty());
  EXPECT_EQ(link.Launches().size(), static_cast<size_t>(kJobs));
}

TEST_F(JobManagerTest, WithTheLoopRunningAnArrayIsTakenInAsASubmissionIsAndAnsweredOnceWithEveryElementPlaced) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1", 16), &link).ok());
  manager_->Start();
  auto spec = api::LoadJobSpec("name: sweep\nreplicas:\n  worker: {command: [x], resources: {gpus: 1}}\n",
                               config_.limits);
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->set_array("0-3");
  absl::Notification answered;
  absl::StatusOr<v1::SubmitResponse> resp;
  std::vector<std::string> problems;
  manager_->SubmitAsync(*spec, [&](absl::StatusOr<v1::SubmitResponse> r) {
    // One answer for the array, given after the round that took its
    // elements in: each is in the views and placed.
    if (r.ok()) {
      for (const std::string& element : r->array_jobs()) {
        std::shared_ptr<const v1::JobView> view = manager_->JobSummary(element);
        if (!view) {
          problems.push_back(element + ": answered before its view was published");
        } else if (view->state() == v1::JOB_QUEUED) {
          problems.push_back(element + ": answered while still queued on a node with room");
        }
      }
    }
    resp = std::move(r);
    answered.Notify();
  });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  manager_->Stop();
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->job(), "sweep");
  EXPECT_THAT(resp->array_jobs(), ::testing::ElementsAre("sweep-0", "sweep-1", "sweep-2", "sweep-3"));
  EXPECT_THAT(problems, ::testing::IsEmpty());
  EXPECT_EQ(link.Launches().size(), 4u);
}

TEST_F(JobManagerTest, JobsSurviveARestartOfTheManager) {
  std::string job = Submit("name: durable\nreplicas:\n  worker: {command: [x]}\n");
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  JobManager second(config_, &store_, std::move(*sched), &streams_, &clock_);
  ASSERT_TRUE(second.Recover().ok());
  auto v = second.Describe(job);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state(), v1::JOB_QUEUED);
}

}  // namespace
}  // namespace trainyard::server

namespace trainyard::server {
namespace {

TEST_F(JobManagerTest, ProductionJobPreemptsPtrJobWhichReturnsToTheQueue) {
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string low = Submit("name: low\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 4}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  for (const auto& t : link.Launches()) Report("n1", t, v1::TASK_RUNNING);
  ASSERT_EQ(Describe(low).state(), v1::JOB_RUNNING);
  std::string high = Submit("name: high\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  auto kills = link.Kills();
  ASSERT_EQ(kills.size(), 2u) << Describe(high).reason();
  EXPECT_GT(kills[0].grace_ms(), 0);
  for (const auto& t : link.Launches()) {
    if (t.job() == low) Report("n1", t, v1::TASK_KILLED);
  }
  v1::JobView v = Describe(low);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_EQ(v.reason(), "preempted by job high (priority production) at 2023-11-14T22:13:20Z");
  manager_->ScheduleNowForTest();
  EXPECT_EQ(Describe(high).state(), v1::JOB_SCHEDULED);
}

}  // namespace
}  // namespace trainyard::server

namespace trainyard::server {
namespace {

TEST_F(JobManagerTest, PreemptionWorksForJobsWithParameterServersPortsAndAMaster) {
  ASSERT_NO_FATAL_FAILURE(WithJobMasters());
  FakeLink link;
  ASSERT_TRUE(Connect(JobManagerNode("n1"), &link).ok());
  std::string low = Submit(R"(
name: low
framework: tensorflow
priority: ptr
replicas:
  ps:
    count: 2
    resources: {cpu: 500m, memory: 256Mi}
    command: [x]
  worker:
    count: 2
    resources: {cpu: 500m, memory: 256Mi, gpus: 4}
    command: [x]
)");
  manager_->ScheduleNowForTest();
  for (const auto& t : link.Launches()) Report("n1", t, v1::TASK_RUNNING);
  ASSERT_EQ(Describe(low).state(), v1::JOB_RUNNING);
  clock_.Advance(absl::Seconds(1));
  std::string high = Submit("name: high\npriority: production\nreplicas:\n  worker:\n    count: 2\n    resources: {gpus: 4}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  // It has a master: the master is ordered to have its workers checkpoint
  // first (docs/jobmaster.md, "Checkpoints"), and its answer stops the tasks.
  EXPECT_TRUE(link.Kills().empty());
  ASSERT_GT(Describe(low).checkpoint_order().id(), 0);
  v1::CheckpointReport none;
  none.set_job(low);
  none.set_order_id(Describe(low).checkpoint_order().id());
  none.set_saved(false);  // no worker of it checkpoints
  ASSERT_TRUE(manager_->ReportCheckpoint(none).ok());
  EXPECT_EQ(link.Kills().size(), 5u) << Describe(high).reason();
}

}  // namespace
}  // namespace trainyard::server

namespace trainyard::server {
namespace {

TEST_F(JobManagerTest, PortsThatNoNodeHasFreeLeaveTheJobPendingWithAReason) {
  FakeLink link;
  v1::NodeInfo n = JobManagerNode("n1");
  n.mutable_capacity()->mutable_ports(0)->set_end(30009);  // 10 ports
  ASSERT_TRUE(Connect(n, &link).ok());
  std::string job = Submit("name: porty\nreplicas:\n  worker:\n    resources: {ports: 20}\n    command: [x]\n");
  manager_->ScheduleNowForTest();
  v1::JobView v = Describe(job);
  EXPECT_EQ(v.state(), v1::JOB_QUEUED);
  EXPECT_THAT(v.reason(), HasSubstr("port")) << v.reason();
  EXPECT_TRUE(link.Launches().empty());
}

}  // namespace
}  // namespace trainyard::server
