// Submission through ControlState directly: the server's defaults for what a
// spec leaves out, problems of parsing and validation answered together,
// and the exec-size check. No threads, no sockets, no clock.
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/control/test_backend.h"
#include "server/control/control_state.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

class ControlSubmitTest : public ::testing::Test {
 protected:
  void Make(bool jobmaster = false) {
    config_.jobmaster_enabled = jobmaster;
    auto sched = core::Scheduler::Create(core::SchedulerOptions{});
    ASSERT_TRUE(sched.ok()) << sched.status();
    state_ = std::make_unique<ControlState>(config_, std::move(*sched), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  absl::StatusOr<std::string> Submit(const std::string& yaml) {
    v1::JobSpec spec;
    std::vector<std::string> parse_problems = api::ParseJobSpecYamlInto(yaml, &spec);
    absl::StatusOr<PreparedJob> prepared = state_->PrepareSubmit(spec, now_, parse_problems);
    if (!prepared.ok()) return prepared.status();
    absl::StatusOr<v1::SubmitResponse> resp = state_->AcceptCommitted(*prepared, absl::OkStatus());
    if (!resp.ok()) return resp.status();
    return resp->job();
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlSubmitTest, TasksThatAskForNoCpuOrMemoryGetTheDefaultsAndAreCounted) {
  config_.default_vcores_milli = 1000;
  config_.default_memory_mb = 2048;
  Make();
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 0), 1, now_).ok());  // 32 cores
  std::vector<std::string> jobs;
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<std::string> job = Submit("name: small\nreplicas:\n  worker: {command: [x]}\n");
    ASSERT_TRUE(job.ok()) << job.status();
    jobs.push_back(*job);
  }
  state_->RunRound(now_);
  // Without defaults all 40 ran on the node at once, none of them limited.
  ASSERT_EQ(backend_.launches.size(), 32u);
  EXPECT_EQ(backend_.launches[0].second.allocation().vcores_milli(), 1000);
  EXPECT_EQ(backend_.launches[0].second.allocation().memory_mb(), 2048);
  absl::StatusOr<v1::JobView> waiting = state_->Describe(jobs.back());
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->state(), v1::JOB_QUEUED);
  ASSERT_EQ(waiting->tasks_size(), 1);
  EXPECT_EQ(waiting->tasks(0).vcores_milli(), 1000) << "describe shows what a pending task asks";
  EXPECT_EQ(waiting->tasks(0).memory_mb(), 2048);
  EXPECT_THAT(waiting->events(0).text(),
              HasSubstr("; server defaults for what the spec leaves out: worker cpu 1, memory 2Gi"));
}

TEST_F(ControlSubmitTest, WhatTheSpecAsksIsKeptAndOnlyTheMissingOneDefaulted) {
  config_.default_vcores_milli = 1000;
  config_.default_memory_mb = 1024;
  Make();
  ASSERT_TRUE(Submit("name: half\nreplicas:\n  worker: {command: [x], resources: {cpu: 250m}}\n").ok());
  absl::StatusOr<v1::JobView> v = state_->Describe("half");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->tasks(0).vcores_milli(), 250);
  EXPECT_EQ(v->tasks(0).memory_mb(), 1024);
  EXPECT_THAT(v->events(0).text(), HasSubstr("worker memory 1Gi"));
}

TEST_F(ControlSubmitTest, ParseValidationAndQueueProblemsComeInOneAnswer) {
  Make();
  absl::StatusOr<std::string> job = Submit(R"(
queue: nosuch
replicas:
  worker:
    command: "echo hi"
    resources: {cpu: -1, gpus: 9}
)");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(),
            "replicas.worker.command: must be a list of strings, e.g. [\"sh\", \"-c\", \"echo hi\"], not a string\n"
            "name: required (1-63 characters of a-z, 0-9 and '-')\n"
            "replicas.worker.resources.cpu: -1 is negative\n"
            "replicas.worker.resources.gpus: 9 is above the maximum allocation 8\n"
            "queue: 'nosuch' is not a leaf queue (known: default)");
}

TEST_F(ControlSubmitTest, ACommandOrEnvironmentTheKernelWouldNotExecIsRefusedAtSubmit) {
  config_.exec_arg_max = 64 << 10;
  Make();
  std::string big(70000, 'x');
  absl::StatusOr<std::string> job =
      Submit(absl::StrCat("name: big\nreplicas:\n  worker:\n    command: [x]\n    env: {BIG: ", big, "}\n"));
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("replicas.worker: command, args and environment come to "));
  EXPECT_THAT(job.status().message(), HasSubstr("above the 65536 bytes the kernel will start a program with"));
  EXPECT_TRUE(Submit("name: small\nreplicas:\n  worker: {command: [x], env: {A: b}}\n").ok());
}

TEST_F(ControlSubmitTest, AUserAtMaxPendingJobsIsRefusedUntilOneStartsAndOthersAreNot) {
  config_.max_pending_jobs_per_user = 3;
  Make();
  constexpr char kJob[] = "name: j\nuser: ann\nreplicas:\n  worker: {command: [x], resources: {cpu: 1}}\n";
  std::vector<std::string> jobs;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> job = Submit(kJob);
    ASSERT_TRUE(job.ok()) << job.status();
    jobs.push_back(*job);
  }
  absl::StatusOr<std::string> fourth = Submit(kJob);
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fourth.status().message(),
              HasSubstr("user ann has 3 jobs waiting to start, the most this server takes per user "
                        "(maxPendingJobsPerUser 3)"));
  // Another user is not held back by ann's jobs.
  EXPECT_TRUE(Submit("name: k\nuser: bob\nreplicas:\n  worker: {command: [x], resources: {cpu: 1}}\n").ok());
  // One of ann's jobs starts (the node has room for one more): ann may submit again.
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 0), 1, now_).ok());  // 32 cores
  state_->RunRound(now_);
  absl::StatusOr<v1::JobView> started = state_->Describe(jobs[0]);
  ASSERT_TRUE(started.ok());
  ASSERT_NE(started->state(), v1::JOB_QUEUED);
  EXPECT_TRUE(Submit(kJob).ok());
  ASSERT_TRUE(state_->Kill(jobs[1], "test", now_).ok());
  EXPECT_TRUE(Submit(kJob).ok());
}

TEST_F(ControlSubmitTest, SubmissionsInFlightCountAgainstMaxPendingJobs) {
  config_.max_pending_jobs_per_user = 2;
  Make();
  v1::JobSpec spec;
  ASSERT_TRUE(api::ParseJobSpecYamlInto("name: j\nuser: ann\nreplicas:\n  worker: {command: [x]}\n", &spec).empty());
  absl::StatusOr<PreparedJob> a = state_->PrepareSubmit(spec, now_);
  absl::StatusOr<PreparedJob> b = state_->PrepareSubmit(spec, now_);
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<PreparedJob> c = state_->PrepareSubmit(spec, now_);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  // The store refuses one: its place is free again.
  EXPECT_FALSE(state_->AcceptCommitted(*a, absl::UnavailableError("disk full")).ok());
  EXPECT_TRUE(state_->PrepareSubmit(spec, now_).ok());
}

TEST_F(ControlSubmitTest, MaxSubmissionsPerSecondIsATokenBucketPerUser) {
  config_.max_submissions_per_second_per_user = 4;
  Make();
  constexpr char kJob[] = "name: j\nuser: ann\nreplicas:\n  worker: {command: [x]}\n";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Submit(kJob).ok()) << i;
  absl::StatusOr<std::string> fifth = Submit(kJob);
  EXPECT_EQ(fifth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fifth.status().message(),
              HasSubstr("user ann submits faster than the 4 jobs a second this server takes per user "
                        "(maxSubmissionsPerSecondPerUser)"));
  EXPECT_TRUE(Submit("name: k\nuser: bob\nreplicas:\n  worker: {command: [x]}\n").ok());
  now_ += absl::Milliseconds(250);  // one more token
  EXPECT_TRUE(Submit(kJob).ok());
  EXPECT_FALSE(Submit(kJob).ok());
  now_ += absl::Seconds(10);  // the bucket holds at most one second's worth
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Submit(kJob).ok()) << i;
  EXPECT_FALSE(Submit(kJob).ok());
}

TEST_F(ControlSubmitTest, ASubmissionOverABoundIsRefusedNamingTheFieldTheLimitAndTheKey) {
  config_.spec_bounds.max_tasks = 100;
  Make();
  absl::StatusOr<std::string> job = Submit("name: big\nreplicas:\n  worker: {count: 101, command: [x]}\n");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), "replicas: 101 tasks in all (the sum of the roles' counts) is above the 100 "
                                    "tasks this server takes in one job (maxTasksPerJob in its config)");
  // 5,000 roles (a 144 KB spec) held the server's lock for minutes: now one
  // line, before anything that grows with the roles.
  std::string many = "name: many\nreplicas:\n";
  for (int r = 0; r < 5000; ++r) absl::StrAppend(&many, "  r", r, ": {command: [x]}\n");
  job = Submit(many);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), "replicas: 5000 roles is above the 100 roles this server takes in one job "
                                    "(maxRolesPerJob in its config)");
  EXPECT_TRUE(Submit("name: fits\nreplicas:\n  worker: {count: 100, command: [x]}\n").ok());
}

TEST_F(ControlSubmitTest, CpuBelowTheKernelsMinimumIsRefusedAtSubmit) {
  Make();
  absl::StatusOr<std::string> job = Submit("name: tiny\nreplicas:\n  worker: {command: [x], resources: {cpu: 1m}}\n");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("replicas.worker.resources.cpu: 1m is below 10m, the least CPU"));
}

TEST_F(ControlSubmitTest, EveryTaskOfALargeJobIsLaunchedWithTheWholeJobInItsEnvironment) {
  Make();
  for (int n = 0; n < 4; ++n) {
    ASSERT_TRUE(state_->RegisterAgent(testing::TestNode(absl::StrCat("n", n), 0), n + 1, now_).ok());
  }
  ASSERT_TRUE(Submit("name: tf\nframework: tensorflow\nreplicas:\n"
                     "  ps: {count: 2, command: [x], resources: {cpu: 100m, memory: 64Mi}}\n"
                     "  worker: {count: 200, command: [x], resources: {cpu: 100m, memory: 64Mi}}\n")
                  .ok());
  state_->RunRound(now_);
  ASSERT_EQ(backend_.launches.size(), 202u);
  std::string hosts;
  for (const auto& [node, spec] : backend_.launches) {
    const std::string& tf = spec.env().at("TF_CONFIG");
    EXPECT_THAT(tf, HasSubstr(absl::StrCat("\"task\":{\"index\":", spec.index(), ",\"type\":\"", spec.role(), "\"}}")));
    nlohmann::json parsed = nlohmann::json::parse(tf);
    EXPECT_EQ(parsed["cluster"]["ps"].size(), 2u);
    EXPECT_EQ(parsed["cluster"]["worker"].size(), 200u);
    if (hosts.empty()) hosts = spec.files().at("hosts");
    EXPECT_EQ(spec.files().at("hosts"), hosts);
  }
  EXPECT_EQ(std::count(hosts.begin(), hosts.end(), '\n'), 202);
  EXPECT_THAT(hosts, HasSubstr(" tf-worker-199\n"));
}

// `jobmaster:` in the spec overrides the framework's rule: a pytorch job
// given one launches its master and its ranks learn its address; a job of
// framework none told `false` runs without one.
TEST_F(ControlSubmitTest, TheSpecsJobmasterFieldDecidesWhetherTheJobGetsAMaster) {
  Make(/*jobmaster=*/true);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 0), 1, now_).ok());
  auto launched = [&](const std::string& job) {
    std::vector<v1::TaskSpec> out;
    for (const auto& [node, t] : backend_.launches) {
      if (t.job() == job) out.push_back(t);
    }
    return out;
  };
  absl::StatusOr<std::string> torch = Submit(
      "name: ddp\nframework: pytorch\njobmaster: true\nreplicas:\n  master:\n    command: [x]\n"
      "  worker:\n    count: 2\n    command: [x]\n");
  ASSERT_TRUE(torch.ok()) << torch.status();
  absl::StatusOr<std::string> plain = Submit("name: plain\njobmaster: false\nreplicas:\n  worker: {command: [x]}\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<std::string> usual = Submit("name: usual\nframework: pytorch\nreplicas:\n  master: {command: [x]}\n");
  ASSERT_TRUE(usual.ok()) << usual.status();
  state_->RunRound(now_);
  std::vector<v1::TaskSpec> ddp = launched(*torch);
  ASSERT_EQ(ddp.size(), 4u) << "its master and 3 ranks";
  EXPECT_EQ(std::count_if(ddp.begin(), ddp.end(), [](const v1::TaskSpec& t) { return t.role() == "jobmaster"; }), 1);
  for (const v1::TaskSpec& t : ddp) {
    if (t.role() == "jobmaster") continue;
    EXPECT_TRUE(t.env().contains("TRAINYARD_JOB_MASTER")) << t.role() << " " << t.index();
    EXPECT_TRUE(t.env().contains("RANK")) << "still a pytorch rank";
  }
  for (const std::string& job : {*plain, *usual}) {
    std::vector<v1::TaskSpec> tasks = launched(job);
    ASSERT_EQ(tasks.size(), 1u) << job << ": no master";
    EXPECT_FALSE(tasks[0].env().contains("TRAINYARD_JOB_MASTER")) << job;
  }
}

}  // namespace
}  // namespace trainyard::server
