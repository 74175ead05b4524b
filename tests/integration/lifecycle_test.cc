// A job's life across failures that are not a process exit, through real
// processes: a worker that stops pinging its job master (SIGSTOP) is a
// failure of that worker, restarted by its restart policy; an agent stopped
// on purpose (as `trainyard up` stops its agents on Ctrl-C) puts its jobs
// back in the queue without charging a restart, and they run again when the
// cluster is back on the same data dir.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

std::string MakeOut(const std::string& dir) {
  std::string out = dir + "/out";
  mkdir(out.c_str(), 0755);
  return out;
}

TEST(LifecycleTest, AWorkerThatStopsPingingIsRestartedByItsPolicyAndTheJobSucceeds) {
  Cluster c({.nodes = 1});
  std::string out = MakeOut(c.dir());
  std::string bin = std::filesystem::path(TrainyardBin()).parent_path().string() + "/examples/trainyard-ps-sgd";
  std::string run = absl::StrCat("echo $$ > ", out, "/pid-$TRAINYARD_TASK_NAME-$TRAINYARD_ATTEMPT; exec ", bin,
                                 " --epochs 16 --epoch-sleep-ms 250");
  std::string job = c.Submit(absl::StrCat(R"(
name: hang
framework: tensorflow
replicas:
  ps:
    count: 1
    resources: {cpu: 500m, memory: 256Mi}
    restartPolicy: OnFailure
    maxRestarts: 3
    command: [sh, -c, ')", run, R"(']
  worker:
    count: 2
    resources: {cpu: 500m, memory: 256Mi, gpus: 1}
    restartPolicy: OnFailure
    maxRestarts: 3
    command: [sh, -c, ')", run, R"(']
)"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitUntil([&] { return c.Cli({"logs", job, "worker/1"}).out.find("epoch 2 ") != std::string::npos; },
                      absl::Seconds(60), absl::Milliseconds(200)))
      << c.Describe(job).dump(2);
  int pid = ReadPid(absl::StrCat(out, "/pid-", job, "-worker-1-0"));
  ASSERT_GT(pid, 1);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);  // alive, silent: 5 missed pings later its master puts it in ERROR
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(90))) << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(Task(d, "worker", 1)["restarts"], 1) << d.dump(2);
  EXPECT_TRUE(HasEvent(d, "task_failed", "no ping for")) << d.dump(2);
  EXPECT_GT(ReadPid(absl::StrCat(out, "/pid-", job, "-worker-1-1")), 0) << "its second attempt ran";
  std::string log = c.Cli({"logs", job, "worker/1"}).out;
  EXPECT_TRUE(std::regex_search(log, std::regex("resumed from epoch [1-9]"))) << log;
}

constexpr char kLifecycleSleeper[] = R"(
name: sleeper
replicas:
  worker:
    count: 1
    resources: {cpu: 500m, memory: 64Mi}
    restartPolicy: OnFailure
    maxRestarts: 1
    command: [sh, -c, 'echo $TRAINYARD_RESTART_COUNT >> OUT/starts; exec sleep 600']
)";

std::string SleeperSpec(const std::string& out) {
  std::string s = kLifecycleSleeper;
  return s.replace(s.find("OUT"), 3, out);
}

TEST(LifecycleTest, AnAgentStoppedOnPurposeRequeuesItsJobsWhichComeBackWithTheCluster) {
  Cluster c({.nodes = 1});
  std::string out = MakeOut(c.dir());
  std::string job = c.Submit(SleeperSpec(out));
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  c.agent(0).Stop(absl::Seconds(20));  // SIGTERM, as `trainyard up` stops its agents
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(d["state"], "QUEUED") << d.dump(2);
  EXPECT_THAT(d["reason"].get<std::string>(), HasSubstr("stopped with node node-0")) << d.dump(2);
  EXPECT_EQ(Task(d, "worker")["restarts"], 0) << "a stop with the cluster is not a failure";
  ASSERT_TRUE(c.RestartServer());
  c.RestartAgent(0);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out + "/starts") == "0\n1\n"; }, absl::Seconds(10)))
      << ReadFile(out + "/starts");
  EXPECT_EQ(Task(c.Describe(job), "worker")["restarts"], 0);
  EXPECT_EQ(c.Cli({"kill", job}).exit_code, 0);
}

// `trainyard up` itself: Ctrl-C (SIGINT to `up`) and `up` again on the same
// data dir.
TEST(LifecycleTest, CtrlCOnUpRequeuesRunningJobsAndTheyRunAgainWhenUpStartsAgain) {
  TempDir dir;
  std::string data = dir.path() + "/data";
  std::string out = MakeOut(dir.path());
  std::string address = absl::StrCat("127.0.0.1:", FreePortPair());
  std::string port = address.substr(address.find(':') + 1);
  std::vector<std::string> up = {TrainyardBin(), "up", "--nodes", "1", "--port", port, "--data-dir", data};
  auto cli = [&](std::vector<std::string> args) {
    args.push_back("--server");
    args.push_back(address);
    return RunCli(args, absl::Seconds(60), UpClientEnv(data));
  };
  auto state = [&](const std::string& job) {
    CommandResult r = cli({"describe", job, "-o", "json"});
    return r.exit_code == 0 ? nlohmann::json::parse(r.out, nullptr, false) : nlohmann::json::object();
  };
  std::string job;
  {
    Process first(up, dir.path() + "/up-1.log");
    ASSERT_TRUE(WaitUntil([&] { return ReadFile(first.log()).find("Trainyard is up") != std::string::npos; },
                        absl::Seconds(30)))
        << ReadFile(first.log());
    WriteFile(dir.path() + "/job.yaml", SleeperSpec(out));
    CommandResult sub = cli({"submit", dir.path() + "/job.yaml"});
    ASSERT_EQ(sub.exit_code, 0) << sub.err;
    job = "sleeper";
    ASSERT_TRUE(WaitUntil([&] { return state(job).value("state", "") == "RUNNING"; }, absl::Seconds(30)))
        << state(job).dump(2);
    kill(first.pid(), SIGINT);
    ASSERT_TRUE(WaitUntil([&] { return !first.Running(); }, absl::Seconds(40))) << ReadFile(first.log());
  }
  Process second(up, dir.path() + "/up-2.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(second.log()).find("Trainyard is up") != std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(second.log());
  ASSERT_TRUE(WaitUntil([&] { return state(job).value("state", "") == "RUNNING"; }, absl::Seconds(30)))
      << state(job).dump(2);
  nlohmann::json d = state(job);
  EXPECT_TRUE(HasEvent(d, "requeued", "stopped with node node-0")) << d.dump(2);
  EXPECT_FALSE(HasEvent(d, "finished", "")) << "never FAILED on the way: " << d.dump(2);
  EXPECT_EQ(Task(d, "worker")["restarts"], 0);
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(out + "/starts") == "0\n1\n"; }, absl::Seconds(10)))
      << ReadFile(out + "/starts");
  EXPECT_EQ(cli({"kill", job}).exit_code, 0);
  kill(second.pid(), SIGINT);
  EXPECT_TRUE(WaitUntil([&] { return !second.Running(); }, absl::Seconds(40)));
}

}  // namespace
}  // namespace trainyard::testing
