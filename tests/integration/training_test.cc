// Distributed training end to end on a real cluster: the job master ends a
// job and the parameter servers are stopped; the parameter-server example
// trains to its loss, resumes from its checkpoint after a worker is killed,
// after preemption by a production job, and after its node is lost.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

std::string ExamplesBin() {
  return std::filesystem::path(TrainyardBin()).parent_path().string() + "/examples/trainyard-ps-sgd";
}

// The last "epoch N loss X" of a log, or -1.
double FinalLoss(const std::string& log) {
  std::regex re("epoch \\d+ loss ([0-9.]+)");
  double loss = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
    loss = std::stod((*it)[1]);
  }
  return loss;
}

// A ps_sgd job whose tasks write their pid to OUT/pid-TASK before they start.
std::string PsSgdSpec(const std::string& name, const std::string& out, int workers, int gpus, int epochs,
                      int sleep_ms, const std::string& extra = "") {
  std::string run = absl::StrCat("echo $$ > ", out, "/pid-$TRAINYARD_TASK_NAME; exec ", ExamplesBin(),
                                 " --epochs ", epochs, " --epoch-sleep-ms ", sleep_ms);
  return absl::StrCat("name: ", name, "\nframework: tensorflow\n", extra, R"(
replicas:
  ps:
    count: 2
    resources: {cpu: 500m, memory: 256Mi}
    restartPolicy: OnFailure
    maxRestarts: 5
    command: [sh, -c, ')", run, R"(']
  worker:
    count: )", workers, R"(
    resources: {cpu: 500m, memory: 256Mi, gpus: )", gpus, R"(}
    restartPolicy: OnFailure
    maxRestarts: 5
    command: [sh, -c, ')", run, R"(']
)");
}

bool AllGpusFree(Cluster& c) {
  nlohmann::json nodes = c.Nodes();
  for (const auto& n : nodes["nodes"]) {
    if (n["free_gpu_mask"] != 255) return false;
  }
  return true;
}

TEST(TrainingTest, JobMasterEndsTheJobAndParameterServersAreStopped) {
  Cluster c({.nodes = 2});
  std::string out = MakeOut(c);
  std::string bin = TrainyardBin();
  std::string job = c.Submit(absl::StrCat(R"(
name: barriers
replicas:
  ps:
    count: 2
    command: [sh, -c, 'echo $$ > )", out, R"(/ps-$TRAINYARD_INDEX; exec sleep 600']
  worker:
    count: 3
    command: [sh, -c, ')", bin, " worker barrier && ", bin, " worker barrier && ", bin, R"( worker state COMPLETED']
)"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  absl::Time done = absl::Now();
  nlohmann::json d = c.Describe(job);
  // The job master or the server's own view of the exits ends it, whichever
  // sees the last worker complete first.
  EXPECT_TRUE(std::regex_search(d["reason"].get<std::string>(), std::regex("all (3 )?workers (COMPLETED|completed)")))
      << d["reason"];
  EXPECT_FALSE(d["job_master"].get<std::string>().empty());
  for (int i = 0; i < 2; ++i) {
    int pid = ReadPid(out + "/ps-" + std::to_string(i));
    ASSERT_GT(pid, 0);
    EXPECT_TRUE(WaitUntil([&] { return !Alive(pid); }, absl::Seconds(1) - (absl::Now() - done) + absl::Milliseconds(500)))
        << "ps " << i << " still runs";
  }
  EXPECT_TRUE(WaitUntil([&] { return AllGpusFree(c); }, absl::Seconds(5)));
}

TEST(TrainingTest, ParameterServerExampleTrainsToItsLossAndLeavesNothingBehind) {
  Cluster c({.nodes = 2});
  std::string out = MakeOut(c);
  std::string job = c.Submit(PsSgdSpec("sgd", out, 3, 1, 12, 0));
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(90))) << c.Describe(job).dump(2);
  CommandResult logs = c.Cli({"logs", job, "worker/0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  double loss = FinalLoss(logs.out);
  EXPECT_GT(loss, 0);
  EXPECT_LE(loss, 0.34) << logs.out;
  for (int i = 0; i < 2; ++i) {
    int pid = ReadPid(absl::StrCat(out, "/pid-", job, "-ps-", i));
    EXPECT_TRUE(WaitUntil([&] { return !Alive(pid); }, absl::Seconds(5)));
  }
  EXPECT_TRUE(WaitUntil([&] { return AllGpusFree(c); }, absl::Seconds(5)));
}

TEST(TrainingTest, KilledWorkerRestartsWithItsIdAndResumesFromTheCheckpoint) {
  Cluster c({.nodes = 1});
  std::string out = MakeOut(c);
  std::string job = c.Submit(PsSgdSpec("resume", out, 2, 1, 20, 250));
  std::string w1 = absl::StrCat(job, "-worker-1");
  ASSERT_TRUE(WaitUntil([&] { return FinalLoss(c.Cli({"logs", job, "worker/0"}).out) > 0 &&
                                   c.Cli({"logs", job, "worker/0"}).out.find("epoch 3 ") != std::string::npos; },
                      absl::Seconds(60), absl::Milliseconds(200)));
  int id_before = Task(c.Describe(job), "worker", 1)["worker_id"];
  int pid = ReadPid(out + "/pid-" + w1);
  ASSERT_GT(pid, 1);
  ASSERT_TRUE(Alive(pid));
  kill(pid, SIGKILL);
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(90))) << c.Describe(job).dump(2);
  nlohmann::json t = Task(c.Describe(job), "worker", 1);
  EXPECT_EQ(t["worker_id"], id_before);
  EXPECT_GE(t["restarts"].get<int>(), 1);
  std::string log = c.Cli({"logs", job, "worker/1"}).out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("resumed from epoch (\\d+)"))) << log;
  EXPECT_GE(std::stoi(m[1]), 2) << "it must not start again from epoch 0";
  EXPECT_LE(FinalLoss(c.Cli({"logs", job, "worker/0"}).out), 0.34);
}

TEST(TrainingTest, PreemptedJobReturnsToTheQueueAndResumesFromItsCheckpoint) {
  Cluster c({.nodes = 1, .server_flags = {"--preemption-grace-ms", "3000"}});
  std::string out = MakeOut(c);
  std::string ptr = c.Submit(PsSgdSpec("low", out, 2, 4, 40, 250, "priority: ptr\n"));
  ASSERT_TRUE(WaitUntil([&] { return c.Cli({"logs", ptr, "worker/0"}).out.find("epoch 3 ") != std::string::npos; },
                      absl::Seconds(60), absl::Milliseconds(200)));
  std::string prod = c.Submit(R"(
name: urgent
priority: production
replicas:
  worker:
    count: 2
    resources: {gpus: 4}
    command: [sh, -c, 'sleep 1']
)");
  ASSERT_TRUE(c.WaitForState(prod, "SUCCEEDED", absl::Seconds(60))) << c.Describe(prod).dump(2);
  ASSERT_TRUE(c.WaitForState(ptr, "SUCCEEDED", absl::Seconds(120))) << c.Describe(ptr).dump(2);
  std::string log = c.Cli({"logs", ptr, "worker/0"}).out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("resumed from epoch (\\d+)"))) << log;
  EXPECT_GE(std::stoi(m[1]), 2);
  // It went back to the queue with the reason, and ran again.
  bool preempted = false, requeued = false;
  int scheduled = 0;
  nlohmann::json d = c.Describe(ptr);
  for (const auto& e : d["events"]) {
    preempted |= e["kind"] == "preempted";
    requeued |= e["kind"] == "requeued" &&
                e["text"].get<std::string>().rfind("back in the queue: preempted by job urgent (priority ", 0) == 0;
    scheduled += e["kind"] == "scheduled";
  }
  EXPECT_TRUE(preempted);
  EXPECT_TRUE(requeued) << d.dump(2);
  EXPECT_EQ(scheduled, 2);
}

TEST(TrainingTest, WorkerOfALostNodeIsStartedElsewhereAndTrainingContinues) {
  Cluster c({.nodes = 2, .node_timeout_ms = 1500});
  std::string out = MakeOut(c);
  // 3 workers of 2 GPUs: whichever node is lost, the other has room for its tasks.
  std::string job = c.Submit(PsSgdSpec("lossy", out, 3, 2, 30, 250));
  ASSERT_TRUE(WaitUntil([&] { return c.Cli({"logs", job, "worker/0"}).out.find("epoch 3 ") != std::string::npos; },
                      absl::Seconds(60), absl::Milliseconds(200)));
  std::string lost = Task(c.Describe(job), "worker", 1)["node"];
  int node = lost == "node-0" ? 0 : 1;
  // The node dies: its agent and every task on it.
  c.agent(node).Kill();
  nlohmann::json before = c.Describe(job);
  for (const auto& t : before["tasks"]) {
    if (t["node"] != lost) continue;
    int pid = ReadPid(out + "/pid-" + t["name"].get<std::string>());
    if (pid > 1) kill(pid, SIGKILL);  // the job master writes no pid file
  }
  ASSERT_TRUE(WaitUntil([&] { return Task(c.Describe(job), "worker", 1)["node"] != lost; }, absl::Seconds(30),
                      absl::Milliseconds(200)));
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(120))) << c.Describe(job).dump(2);
  nlohmann::json t = Task(c.Describe(job), "worker", 1);
  EXPECT_EQ(t["worker_id"], Task(before, "worker", 1)["worker_id"]);
  // Its hosts file names the node it runs on now.
  std::string hosts = ReadFile(absl::StrCat(c.dir(), "/", t["node"].get<std::string>(), "/work/job_",
                                            c.Describe(job).value("id", 0), "/worker-1/hosts"));
  EXPECT_THAT(hosts, HasSubstr(absl::StrCat("127.0.0.1 ", job, "-worker-1")));
  std::string log = c.Cli({"logs", job, "worker/1"}).out;
  EXPECT_THAT(log, HasSubstr("resumed from epoch"));
  EXPECT_LE(FinalLoss(c.Cli({"logs", job, "worker/0"}).out), 0.34);
}

}  // namespace
}  // namespace trainyard::testing

namespace trainyard::testing {
namespace {

TEST(TrainingTest, JobMasterCanRunInsideTheSubmittingClient) {
  Cluster c({.nodes = 1});
  std::string bin = TrainyardBin();
  WriteFile(c.dir() + "/inclient.yaml", absl::StrCat(R"(
name: inclient
replicas:
  worker:
    count: 3
    command: [sh, -c, ')", bin, " worker barrier && ", bin, " worker barrier && ", bin, R"( worker state COMPLETED']
)"));
  CommandResult r = c.Cli({"submit", c.dir() + "/inclient.yaml", "--jobmaster-in-client"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("its master runs here at 127.0.0.1:"));
  EXPECT_THAT(r.out, HasSubstr("SUCCEEDED"));
  nlohmann::json d = c.Describe("inclient");
  EXPECT_EQ(d["state"], "SUCCEEDED");
  EXPECT_EQ(d["tasks"].size(), 3u) << "no master task on the cluster";
  EXPECT_THAT(d["job_master"].get<std::string>(), HasSubstr("127.0.0.1:"));
  // It reports its figures with the user's token, as a master task does;
  // the final summary is sent before the command exits.
  HttpResult m = HttpGet(c.http_address(), "/metrics");
  EXPECT_EQ(MetricSample(m.body, "trainyard_jobmaster_barrier_duration_seconds_count"), 2.0) << m.body;
  EXPECT_EQ(MetricSample(m.body, "trainyard_jobmasters_reporting"), 0.0);
  EXPECT_GE(
      MetricSample(m.body, "trainyard_grpc_requests_total{method=\"ReportJobMasterSummary\",code=\"OK\"}").value_or(0),
      1.0);
}

}  // namespace
}  // namespace trainyard::testing
