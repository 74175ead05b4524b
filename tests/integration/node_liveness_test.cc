// How the server judges its nodes, with real processes: a server that was
// itself frozen (SIGSTOP, as a VM pause or a swap storm would) must not take
// the heartbeats it could not read as its nodes' silence, and a node that
// comes back within the timeout with other hardware must be scheduled on what
// it has now, not on what it had. And a node with nothing new to say beats
// only every quiet interval, yet stays READY and keeps its tasks.
#include <signal.h>

#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// The node view of `name` in `trainyard nodes -o json` (empty when absent).
nlohmann::json NodeView(const nlohmann::json& nodes, const std::string& name) {
  for (const auto& n : nodes.value("nodes", nlohmann::json::array())) {
    if (n["info"].value("name", "") == name) return n;
  }
  return nlohmann::json::object();
}

// Task name -> the node it runs on, for every task of a describe JSON.
std::map<std::string, std::string> TaskNodes(const nlohmann::json& d) {
  std::map<std::string, std::string> out;
  for (const auto& t : d.value("tasks", nlohmann::json::array())) out[t.value("name", "")] = t.value("node", "");
  return out;
}

// What a server that took its own stall for its nodes' silence would show:
// a node LOST, a task restarted, moved or on another node, the job requeued.
// Empty when none of it is there. A view that could not be read (the server
// busy catching up) shows nothing.
std::string StallDamage(Cluster& c, const std::string& job, const std::map<std::string, std::string>& placed) {
  for (const auto& n : c.Nodes().value("nodes", nlohmann::json::array())) {
    if (n["info"].value("state", "") == "LOST") return absl::StrCat("node ", n["info"].value("name", ""), " LOST");
  }
  nlohmann::json d = c.Describe(job);
  for (const auto& t : d.value("tasks", nlohmann::json::array())) {
    std::string name = t.value("name", "");
    if (t.value("attempt", 0) != 0 || t.value("restarts", 0) != 0) return name + " started again";
    if (t.contains("node") && t["node"] != placed.at(name)) return absl::StrCat(name, " moved to ", t["node"].dump());
  }
  for (const auto& e : d.value("events", nlohmann::json::array())) {
    std::string kind = e.value("kind", "");
    if (kind == "task_moved" || kind == "task_restarted" || kind == "requeued") return "event " + e.dump();
  }
  return "";
}

TEST(NodeLivenessTest, ServerStoppedAndContinuedDoesNotDeclareHealthyNodesLost) {
  Cluster c({.nodes = 2, .node_timeout_ms = 3000, .heartbeat_interval_ms = 200});
  std::string job = c.Submit(R"(
name: steady
replicas:
  worker:
    count: 2
    restartPolicy: OnFailure
    maxRestarts: 3
    resources: {gpus: 8, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  std::map<std::string, std::string> placed = TaskNodes(c.Describe(job));
  // A whole node each: both nodes have a task to lose.
  ASSERT_GE(placed.size(), 2u);
  ASSERT_EQ(StallDamage(c, job, placed), "");

  // The one sleep of the test is the stall itself: the server is frozen for
  // twice the node timeout while the agents keep sending heartbeats it cannot
  // read. There is no condition to wait on; the length of the freeze is what
  // is being tested.
  ASSERT_EQ(kill(c.server().pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::seconds(6));
  ASSERT_EQ(kill(c.server().pid(), SIGCONT), 0);

  // A server that judged its nodes on the stale heartbeats does so on its
  // first round after waking; watch for it over a good number of heartbeat
  // intervals (and past the log line that says it noticed the stall).
  std::string damage;
  EXPECT_FALSE(WaitUntil([&] { return !(damage = StallDamage(c, job, placed)).empty(); }, absl::Seconds(3),
                       absl::Milliseconds(100)))
      << damage << "\n" << c.Nodes().dump(2) << "\n" << c.Describe(job).dump(2);
  EXPECT_THAT(ReadFile(c.dir() + "/server.log"), HasSubstr("did not run for"));

  nlohmann::json nodes = c.Nodes();
  for (const std::string name : {"node-0", "node-1"}) {
    EXPECT_EQ(NodeView(nodes, name)["info"].value("state", ""), "READY") << nodes.dump(2);
  }
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(d.value("state", ""), "RUNNING") << d.dump(2);
  EXPECT_EQ(TaskNodes(d), placed) << d.dump(2);
  for (const auto& t : d["tasks"]) {
    EXPECT_EQ(t.value("state", ""), "RUNNING") << t.dump(2);
    EXPECT_EQ(t.value("attempt", 0), 0) << t.dump(2);
  }
}

// Beats the server heard so far: all of them, and those that came within
// 0.25 s (just over the heartbeat interval here) and 1.5 s of the node's
// last one.
struct BeatGaps {
  double all = 0, within_quarter = 0, within_1_5 = 0;
  double Quiet() const { return all - within_1_5; }  // more than 1.5 s after the last
};
BeatGaps HeardBeats(const Cluster& c) {
  std::string m = HttpGet(c.http_address(), "/metrics").body;
  const std::string h = "trainyard_agent_heartbeat_interval_seconds";
  return {MetricSample(m, h + "_count").value_or(0), MetricSample(m, h + "_bucket{le=\"0.25\"}").value_or(0),
          MetricSample(m, h + "_bucket{le=\"1.5\"}").value_or(0)};
}

TEST(NodeLivenessTest, ANodeWithNothingNewBeatsAtTheQuietIntervalAndKeepsItsTasks) {
  // Beats every 0.2 s, a quiet one every 2 s (a quarter of the timeout).
  Cluster c({.nodes = 2, .node_timeout_ms = 8000, .heartbeat_interval_ms = 200, .quiet_heartbeat_interval_ms = 2000});
  std::string job = c.Submit(R"(
name: steady
nodeName: node-0
replicas:
  worker:
    count: 2
    resources: {cpu: 0.1, memory: 16Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);

  BeatGaps before = HeardBeats(c), now;
  ASSERT_TRUE(WaitUntil([&] {
    now = HeardBeats(c);
    return now.Quiet() - before.Quiet() >= 8;
  }, absl::Seconds(90))) << "beats more than 1.5 s apart: " << now.Quiet() - before.Quiet() << " of "
                         << now.all - before.all;
  EXPECT_LT(now.within_quarter - before.within_quarter, now.Quiet() - before.Quiet())
      << "the idle nodes beat at the heartbeat interval more often than at the quiet one";

  nlohmann::json nodes = c.Nodes();
  for (const std::string name : {"node-0", "node-1"}) {
    EXPECT_EQ(NodeView(nodes, name)["info"].value("state", ""), "READY") << nodes.dump(2);
  }
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(d.value("state", ""), "RUNNING") << d.dump(2);
  for (const auto& t : d.value("tasks", nlohmann::json::array())) {
    EXPECT_EQ(t.value("state", ""), "RUNNING") << t.dump(2);
    EXPECT_EQ(t.value("attempt", 0), 0) << "its tasks were never taken as gone\n" << t.dump(2);
  }
  // A change goes at once: the kill's ends arrive.
  ASSERT_EQ(c.Cli({"kill", job}).exit_code, 0);
  EXPECT_TRUE(c.WaitForState(job, "KILLED", absl::Seconds(60))) << c.Describe(job).dump(2);
}

// Issue 30: three OnFailure workers that only node-0 may run, and node-0's
// agent paused (SIGSTOP) past the node timeout. The server aborted ("job
// pinned is already pending") and, restarted while the node was away,
// aborted again. Now the job goes back to the queue, the server (restarted
// meanwhile) stays up past the timeout, and the job runs on node-0 again
// once its agent continues.
TEST(NodeLivenessTest, AnAgentPausedPastTheTimeoutRequeuesItsPinnedJobAndRunsItAgainWhenItContinues) {
  Cluster c({.nodes = 2, .node_timeout_ms = 2000, .heartbeat_interval_ms = 200});
  std::string job = c.Submit(R"(
name: pinned
nodeName: node-0
replicas:
  worker:
    count: 3
    restartPolicy: OnFailure
    resources: {gpus: 1, cpu: 0.1, memory: 16Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  pid_t paused = c.agent(0).pid();
  ASSERT_EQ(kill(paused, SIGSTOP), 0);
  EXPECT_TRUE(c.WaitForState(job, "QUEUED", absl::Seconds(30))) << c.Describe(job).dump(2);
  ASSERT_EQ(kill(c.server().pid(), 0), 0) << "the server is up\n" << ReadFile(c.dir() + "/server.log");

  // Restarted while node-0 is still away: it recovers, judges node-0 lost
  // once the timeout has passed, and stays up.
  size_t skip = ReadFile(c.dir() + "/server.log").size();
  c.KillServer();
  ASSERT_TRUE(c.RestartServer()) << ReadFile(c.dir() + "/server.log");
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(c.dir() + "/server.log").find("node node-0 lost", skip) != std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(c.dir() + "/server.log").substr(skip);
  EXPECT_EQ(c.JobState(job), "QUEUED") << c.Describe(job).dump(2);
  ASSERT_EQ(kill(c.server().pid(), 0), 0) << ReadFile(c.dir() + "/server.log").substr(skip);

  ASSERT_EQ(kill(paused, SIGCONT), 0);
  EXPECT_TRUE(c.WaitForState(job, "RUNNING", absl::Seconds(60))) << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  for (const auto& t : d["tasks"]) {
    EXPECT_EQ(t.value("node", ""), "node-0") << t.dump(2);
    EXPECT_EQ(t.value("state", ""), "RUNNING") << t.dump(2);
    EXPECT_GE(t.value("attempt", 0), 1) << "a new attempt\n" << t.dump(2);
  }
  EXPECT_EQ(ReadFile(c.dir() + "/server.log").find("check failed"), std::string::npos);
}

TEST(NodeLivenessTest, NodeBackWithinTheTimeoutWithFewerGpusIsScheduledOnItsNewSpec) {
  Cluster c({.nodes = 1, .gpus = 8, .node_timeout_ms = 10000});
  ASSERT_EQ(NodeView(c.Nodes(), "node-0").value("free_gpu_mask", uint64_t{0}), 255u);

  // Same name, same data dir, back long before the node timeout: the server
  // never declares it lost, so only its new registration tells of 2 GPUs.
  c.agent(0).Kill();
  size_t skip = ReadFile(c.agent(0).log()).size();  // the log is appended to across restarts
  c.RestartAgent(0, 2, "switches=0-1;sockets=0-1");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(c.agent(0).log()).find("registered with", skip) != std::string::npos; },
                      absl::Seconds(10)))
      << ReadFile(c.agent(0).log());
  EXPECT_TRUE(WaitUntil([&] {
    nlohmann::json n = NodeView(c.Nodes(), "node-0");
    return n["info"].value("state", "") == "READY" && n.value("free_gpu_mask", uint64_t{0}) == 3;
  }, absl::Seconds(10), absl::Milliseconds(100)))
      << "the scheduler does not offer the node's 2 GPUs: " << c.Nodes().dump(2);
  EXPECT_EQ(NodeView(c.Nodes(), "node-0")["info"]["topology"].value("gpu_count", 0), 2) << c.Nodes().dump(2);

  std::string big = c.Submit(R"(
name: big
replicas:
  worker:
    resources: {gpus: 4, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_FALSE(big.empty());
  // Decided either way: waiting with a reason, or placed.
  ASSERT_TRUE(WaitUntil([&] {
    nlohmann::json d = c.Describe(big);
    return !d.value("reason", "").empty() || (!d.value("state", "").empty() && d["state"] != "QUEUED");
  }, absl::Seconds(10), absl::Milliseconds(100)))
      << c.Describe(big).dump(2);
  // A job that fits runs: the scheduler has had its rounds since "big" came.
  std::string small = c.Submit(R"(
name: small
replicas:
  worker:
    resources: {gpus: 1, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_FALSE(small.empty());
  EXPECT_TRUE(c.WaitForState(small, "RUNNING")) << c.Describe(small).dump(2) << "\n" << c.Describe(big).dump(2);
  nlohmann::json d = c.Describe(big);
  EXPECT_EQ(d.value("state", ""), "QUEUED") << "placed beyond the node's 2 GPUs: " << d.dump(2);
  EXPECT_THAT(d.value("reason", ""), HasSubstr("needs 4 GPUs on one node")) << d.dump(2);
  c.Cli({"kill", small});
  c.Cli({"kill", big});
}

}  // namespace
}  // namespace trainyard::testing
