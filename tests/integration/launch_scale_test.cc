// A big job on real agents while heartbeats flow: 1,000 one-process tasks on
// 4 agents, with a heartbeat every 50 ms so that many of them cross the
// launches. No launch in flight may be taken for an ended task (the reconcile
// rule of docs/agent.md, "Launches and heartbeats"): the job must run with
// every task on its first attempt and all 1,000 processes alive, and killing
// it must leave none of them behind.
#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

constexpr int kTasks = 1000;

// The pids of the processes whose command line is exactly `sleep TAG`.
std::set<pid_t> Sleepers(const std::string& tag) {
  std::string want = absl::StrCat("sleep", std::string(1, '\0'), tag, std::string(1, '\0'));
  std::set<pid_t> pids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadFile(e.path().string() + "/cmdline") == want) pids.insert(std::stoi(name));
  }
  return pids;
}

bool Settled(const std::string& state) {
  return state == "RUNNING" || state == "FAILED" || state == "KILLED" || state == "SUCCEEDED";
}

TEST(LaunchScaleTest, ThousandTasksStartWhileHeartbeatsFlowAndAKillLeavesNoProcess) {
  // A node timeout far above any stall of a loaded machine: the test is
  // about launches and heartbeats, not about nodes being lost.
  Cluster c({.nodes = 4, .node_timeout_ms = 120000, .heartbeat_interval_ms = 50});
  std::string tag = absl::StrCat(60000 + getpid() % 5000);
  std::string job = c.Submit(absl::StrCat(R"(
name: big
replicas:
  worker:
    count: )", kTasks, R"(
    resources: {cpu: 100m, memory: 64Mi}
    command: [sleep, ")", tag, R"("]
)"));
  ASSERT_FALSE(job.empty());
  std::string state;
  ASSERT_TRUE(WaitUntil([&] { return Settled(state = c.JobState(job)); }, absl::Minutes(8), absl::Milliseconds(500)))
      << "the job never started nor ended; it is " << state;
  nlohmann::json d = c.Describe(job);
  for (const auto& e : d.value("events", nlohmann::json::array())) {
    std::string kind = e.value("kind", "");
    EXPECT_TRUE(kind != "task_restarted" && kind != "task_failed" && kind != "task_moved" && kind != "finished")
        << "a task was taken for ended: " << e.dump();
  }
  ASSERT_EQ(state, "RUNNING");
  int workers = 0;
  for (const auto& t : d.value("tasks", nlohmann::json::array())) {
    if (t.value("role", "") != "worker") continue;
    ++workers;
    EXPECT_EQ(t.value("state", ""), "RUNNING") << t.dump();
    EXPECT_EQ(t.value("attempt", 0), 0) << t.dump();
  }
  EXPECT_EQ(workers, kTasks);
  std::set<pid_t> pids;
  // RUNNING is reported once each process started: they are all there.
  ASSERT_TRUE(WaitUntil([&] { return (pids = Sleepers(tag)).size() == static_cast<size_t>(kTasks); },
                      absl::Seconds(30), absl::Milliseconds(200)))
      << pids.size() << " of " << kTasks << " processes are alive";

  CommandResult killed = c.Cli({"kill", job});
  ASSERT_EQ(killed.exit_code, 0) << killed.err;
  auto alive = [&pids] {
    int n = 0;
    for (pid_t p : pids) n += kill(p, 0) == 0 ? 1 : 0;
    return n;
  };
  EXPECT_TRUE(WaitUntil([&] { return alive() == 0; }, absl::Minutes(2), absl::Milliseconds(100)))
      << alive() << " task processes outlived the kill";
  EXPECT_TRUE(c.WaitForState(job, "KILLED", absl::Minutes(2))) << c.JobState(job);
  for (pid_t p : pids) kill(p, SIGKILL);  // whatever a failure above left
}

}  // namespace
}  // namespace trainyard::testing
