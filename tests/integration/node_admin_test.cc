// Node administration and node health with real processes: cordon, drain,
// uncordon and remove through the CLI (cordon survives a server restart; a
// drained node's tasks run elsewhere without a restart charged), and a node
// whose launches fail (its task directory cannot be written) taken out of
// placement with a reason, its tasks placed elsewhere uncharged.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string NodeState(Cluster& c, const std::string& name) {
  nlohmann::json n = NodeNamed(c, name);
  return n.contains("info") ? n["info"].value("state", "") : "";
}

// True when every task of the job runs on `node` and none was charged a
// restart; *why says what was seen otherwise.
bool AllRunningOnUncharged(Cluster& c, const std::string& job, const std::string& node, std::string* why) {
  nlohmann::json d = c.Describe(job);
  *why = d.dump(1);
  if (d.value("state", "") != "RUNNING") return false;
  for (const auto& t : d["tasks"]) {
    if (t.value("node", "") != node || t.value("state", "") != "RUNNING" || t.value("restarts", -1) != 0) return false;
  }
  return true;
}

constexpr char kNodeAdminSleeper[] = R"(
name: mover
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 1}
    command: [sleep, '600']
    restartPolicy: OnFailure
    maxRestarts: 3
)";

TEST(NodeAdminTest, CordonSurvivesARestartDrainMovesTasksUnchargedAndALostNodeIsRemoved) {
  Cluster c({.nodes = 2});
  ASSERT_TRUE(c.WaitNodesReady(2));
  CommandResult r = c.Cli({"cordon", "node-1", "--reason", "fan replaced"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("node node-1: CORDONED"));
  EXPECT_EQ(NodeNamed(c, "node-1").value("reason", ""), "cordoned: fan replaced");
  std::string job = c.Submit(kNodeAdminSleeper);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(1);
  std::string why;
  EXPECT_TRUE(AllRunningOnUncharged(c, job, "node-0", &why)) << "a cordoned node takes no task: " << why;
  // `trainyard status`: one server on SQLite; the cordoned node is not ready.
  CommandResult status;
  EXPECT_TRUE(WaitUntil([&] {
    status = c.Cli({"status"});
    return status.out.find("Jobs:       1 running, 0 queued") != std::string::npos;
  }, absl::Seconds(20))) << status.out << status.err;
  EXPECT_THAT(status.out, HasSubstr("Server:     " + c.address()));
  EXPECT_THAT(status.out, HasSubstr("Store:      sqlite"));
  EXPECT_THAT(status.out, HasSubstr("Nodes:      1 of 2 ready"));

  ASSERT_TRUE(c.RestartServer());
  ASSERT_TRUE(WaitUntil([&] { return NodeState(c, "node-0") == "READY"; }, absl::Seconds(20)));
  EXPECT_TRUE(WaitUntil([&] { return NodeState(c, "node-1") == "CORDONED"; }, absl::Seconds(20)))
      << "the cordon is kept across a server restart: " << c.Nodes().dump(1);

  ASSERT_EQ(c.Cli({"uncordon", "node-1"}).exit_code, 0);
  r = c.Cli({"drain", "node-0", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json drained = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_GE(drained.value("evicted", 0), 1) << r.out;
  EXPECT_EQ(drained["node"]["info"].value("state", ""), "DRAINING");
  EXPECT_TRUE(WaitUntil([&] { return AllRunningOnUncharged(c, job, "node-1", &why); }, absl::Seconds(30)))
      << "the drained node's tasks run on node-1, no restart charged: " << why;

  // A LOST node: drawn as unknown, not as full; removed only once LOST.
  r = c.Cli({"node", "remove", "node-0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("not LOST"));
  c.agent(0).Stop();
  ASSERT_TRUE(WaitUntil([&] { return NodeState(c, "node-0") == "LOST"; }, absl::Seconds(20)));
  r = c.Cli({"nodes"});
  EXPECT_THAT(r.out, HasSubstr("????????")) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("■■■■■■■■"))) << r.out;
  r = c.Cli({"node", "remove", "node-0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(NodeNamed(c, "node-0"), nlohmann::json::object()) << c.Nodes().dump(1);
  ASSERT_TRUE(c.RestartServer());
  ASSERT_TRUE(WaitUntil([&] { return NodeState(c, "node-1") == "READY"; }, absl::Seconds(20)));
  EXPECT_EQ(NodeNamed(c, "node-0"), nlohmann::json::object()) << "removed from the store too";
}

TEST(NodeAdminTest, ANodeWhoseLaunchesFailIsTakenOutAndItsTasksRunElsewhereUncharged) {
  Cluster c({.nodes = 2});
  ASSERT_TRUE(c.WaitNodesReady(2));
  ASSERT_EQ(c.Cli({"cordon", "node-1"}).exit_code, 0);
  // node-0's agent can no longer write task directories (and their hosts
  // files): where they go is now a plain file.
  std::string work = c.dir() + "/node-0/work";
  std::filesystem::remove_all(work);
  WriteFile(work, "not a directory");
  std::string job = c.Submit(kNodeAdminSleeper);
  ASSERT_FALSE(job.empty());
  EXPECT_TRUE(WaitUntil([&] { return NodeState(c, "node-0") == "DEGRADED"; }, absl::Seconds(20))) << c.Nodes().dump(1);
  EXPECT_THAT(NodeNamed(c, "node-0").value("reason", ""), HasSubstr("launches in a row failed on it"));
  EXPECT_THAT(c.Cli({"nodes"}).out, HasSubstr("DEGRADED"));
  EXPECT_TRUE(c.WaitForState(job, "QUEUED")) << "waits for a node, not FAILED: " << c.Describe(job).dump(1);
  ASSERT_EQ(c.Cli({"uncordon", "node-1"}).exit_code, 0);
  std::string why;
  EXPECT_TRUE(WaitUntil([&] { return AllRunningOnUncharged(c, job, "node-1", &why); }, absl::Seconds(30))) << why;
}

}  // namespace
}  // namespace trainyard::testing
