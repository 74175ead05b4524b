// NodeTable's rules on a node's own record, with explicit time: how a node
// is shown, when it takes tasks, and how its silence is judged and excused.
#include "server/control/node_table.h"

#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

NodeRt& Ready(NodeTable& table, const std::string& name, absl::Time heard) {
  auto node = std::make_unique<NodeRt>();
  node->info.set_name(name);
  node->session = 1;
  node->state = v1::NODE_READY;
  node->last_heartbeat = node->heard = heard;
  return table.Add(name, std::move(node));
}

TEST(NodeTableTest, ANodeIsShownByItsWorstConditionWithEveryReason) {
  NodeTable table;
  NodeRt& n = Ready(table, "n1", kT0);
  EXPECT_EQ(NodeTable::ShownState(n), v1::NODE_READY);
  EXPECT_EQ(NodeTable::ShownReason(n), "");
  n.disk_reason = "data dir has 100 MB free";
  EXPECT_EQ(NodeTable::ShownState(n), v1::NODE_DEGRADED);
  n.cordoned = true;
  n.admin_reason = "cordoned: rack work";
  EXPECT_EQ(NodeTable::ShownState(n), v1::NODE_CORDONED);
  n.health_reason = "GPU 1: Xid 79";
  EXPECT_EQ(NodeTable::ShownState(n), v1::NODE_DRAINING);
  EXPECT_EQ(NodeTable::ShownReason(n), "cordoned: rack work; GPU 1: Xid 79; data dir has 100 MB free");
  n.state = v1::NODE_LOST;
  EXPECT_EQ(NodeTable::ShownState(n), v1::NODE_LOST);
}

TEST(NodeTableTest, OnlyAConnectedReadyNodeWithNothingAgainstItTakesTasks) {
  NodeTable table;
  NodeRt& n = Ready(table, "n1", kT0);
  EXPECT_TRUE(NodeTable::TakesTasks(n));
  n.session = 0;
  EXPECT_FALSE(NodeTable::TakesTasks(n)) << "disconnected";
  n.session = 2;
  for (bool NodeRt::*flag : {&NodeRt::agent_stopping, &NodeRt::cordoned, &NodeRt::draining}) {
    n.*flag = true;
    EXPECT_FALSE(NodeTable::TakesTasks(n));
    n.*flag = false;
  }
  n.fault_reason = "3 launches failed";
  EXPECT_FALSE(NodeTable::TakesTasks(n)) << "degraded";
  n.fault_reason.clear();
  n.health_reason = "GPU fault";
  EXPECT_FALSE(NodeTable::TakesTasks(n));
  n.health_reason.clear();
  n.state = v1::NODE_LOST;
  EXPECT_FALSE(NodeTable::TakesTasks(n));
}

TEST(NodeTableTest, SilenceIsJudgedFromTheLastHeartbeatAndTheServersStallIsExcused) {
  NodeTable table;
  const absl::Duration timeout = absl::Seconds(10);
  Ready(table, "b", kT0);
  Ready(table, "a", kT0 + absl::Seconds(5));
  NodeRt& lost = Ready(table, "c", kT0 - absl::Minutes(1));
  lost.state = v1::NODE_LOST;
  EXPECT_TRUE(table.SilentPast(kT0 + timeout, timeout).empty()) << "exactly the timeout is not past it";
  std::vector<NodeRt*> silent = table.SilentPast(kT0 + absl::Seconds(16), timeout);
  ASSERT_EQ(silent.size(), 2u) << "a LOST node is not lost again";
  EXPECT_EQ(silent[0]->info.name(), "a");
  EXPECT_EQ(silent[1]->info.name(), "b");
  // The server did not run for 20 s: nobody's silence counts it.
  table.ExcuseStall(absl::Seconds(20));
  EXPECT_EQ(table.Find("b")->last_heartbeat, kT0 + absl::Seconds(20));
  EXPECT_EQ(table.Find("b")->heard, kT0 + absl::Seconds(20));
  EXPECT_EQ(table.Find("c")->last_heartbeat, kT0 - absl::Minutes(1)) << "a LOST node is not excused";
  EXPECT_TRUE(table.SilentPast(kT0 + absl::Seconds(25), timeout).empty());
}

TEST(NodeTableTest, AnOverloadIsExcusedUpToNowAndNeverPastTheSilenceBound) {
  NodeTable table;
  const absl::Duration timeout = absl::Seconds(10);
  NodeRt& n = Ready(table, "n1", kT0);
  // 8 s the server could not read, at kT0 + 12 s: moved forward by 8 s.
  table.ExcuseOverload(absl::Seconds(8), kT0 + absl::Seconds(12), timeout, 3);
  EXPECT_EQ(n.last_heartbeat, kT0 + absl::Seconds(8));
  EXPECT_EQ(n.heard, kT0) << "what was heard stays what was heard";
  // Never past now.
  table.ExcuseOverload(absl::Seconds(30), kT0 + absl::Seconds(13), timeout, 3);
  EXPECT_EQ(n.last_heartbeat, kT0 + absl::Seconds(13));
  // Never so far that a node heard from 3 timeouts ago would stay READY:
  // at most heard + 2 timeouts.
  table.ExcuseOverload(absl::Minutes(5), kT0 + absl::Minutes(5), timeout, 3);
  EXPECT_EQ(n.last_heartbeat, kT0 + absl::Seconds(20));
  EXPECT_EQ(table.SilentPast(kT0 + absl::Seconds(31), timeout).size(), 1u);
}

TEST(NodeTableTest, NodesAreFoundByNameAndListedInNameOrderUntilRemoved) {
  NodeTable table;
  Ready(table, "n2", kT0);
  Ready(table, "n1", kT0);
  ASSERT_NE(table.Find("n2"), nullptr);
  EXPECT_EQ(table.Find("n3"), nullptr);
  std::vector<std::string> names;
  for (const auto& [name, node] : table) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"n1", "n2"}));
  table.Remove("n2");
  EXPECT_EQ(table.Find("n2"), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace trainyard::server
