// ControlState and delta heartbeats: a registration asks the agent for
// deltas (only what changed in its GPU and port use, a full report every
// so many beats); a delta keeps the ports in use and busy GPUs the last full
// one reported, and an unset free disk keeps the last one; a full report
// replaces them. And a node's own change publishes only its own view. A
// registration also tells how long an agent with nothing new may stay
// silent: the quiet interval, at most a quarter of the node timeout.
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "server/control/test_backend.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

class ControlHeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.jobmaster_enabled = false;
    state_ = std::make_unique<ControlState>(config_, core::Scheduler::Create({}).value(), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  v1::NodeView Node(const std::string& name) {
    for (const v1::NodeView& n : state_->ListNodes()) {
      if (n.info().name() == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return {};
  }

  static v1::Heartbeat Full(uint64_t busy, std::vector<uint32_t> ports, int64_t free_mb) {
    v1::Heartbeat hb;
    hb.set_busy_gpu_mask(busy);
    for (uint32_t p : ports) {
      v1::PortRange* r = hb.add_ports_in_use();
      r->set_begin(p);
      r->set_end(p);
    }
    hb.set_data_free_mb(free_mb);
    return hb;
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlHeartbeatTest, RegistrationAsksForDeltaHeartbeatsWithAFullOneEverySoOften) {
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 4), 1, now_).ok());
  ASSERT_EQ(backend_.acks.size(), 1u);
  EXPECT_GT(backend_.acks[0].full_heartbeat_every(), 1);
}

TEST_F(ControlHeartbeatTest, RegistrationTellsTheQuietIntervalBoundedByTheNodeTimeout) {
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 4), 1, now_).ok());
  ASSERT_EQ(backend_.acks.size(), 1u);
  EXPECT_EQ(backend_.acks[0].heartbeat_interval_ms(), 1000);
  EXPECT_EQ(backend_.acks[0].quiet_heartbeat_interval_ms(), 2500) << "the default, a quarter of the 10 s timeout";

  config_.node_timeout_ms = 6000;  // a quarter: 1.5 s, below the 2.5 s asked for
  state_ = std::make_unique<ControlState>(config_, core::Scheduler::Create({}).value(), &backend_, now_);
  state_->Recover(StoreSnapshot{}, {}, now_);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n2", 4), 1, now_).ok());
  EXPECT_EQ(backend_.acks.back().quiet_heartbeat_interval_ms(), 1500);

  config_.node_timeout_ms = 3000;  // a quarter is below the beat itself: every beat goes
  state_ = std::make_unique<ControlState>(config_, core::Scheduler::Create({}).value(), &backend_, now_);
  state_->Recover(StoreSnapshot{}, {}, now_);
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n3", 4), 1, now_).ok());
  EXPECT_EQ(backend_.acks.back().quiet_heartbeat_interval_ms(), 0);
}

TEST_F(ControlHeartbeatTest, RegistrationNamesTheServingPortsAndOnlySocketsOnThemAreInUse) {
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 4), 1, now_).ok());
  ASSERT_EQ(backend_.acks.size(), 1u);
  ASSERT_EQ(backend_.acks[0].serving_ports_size(), 1);
  EXPECT_EQ(backend_.acks[0].serving_ports(0).begin(), 30000u);
  EXPECT_EQ(backend_.acks[0].serving_ports(0).end(), 30999u);
  // An agent that lists every socket of its node (one that predates
  // serving_ports): an outgoing connection's port is no port in use here.
  state_->OnHeartbeat("n1", Full(0, {30005, 30007, 45123}, 5000), now_);
  EXPECT_EQ(Node("n1").ports_in_use(), 2);
}

TEST_F(ControlHeartbeatTest, ADeltaKeepsWhatTheLastFullReportSaid) {
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 4), 1, now_).ok());
  state_->OnHeartbeat("n1", Full(0x1, {30005, 30007}, 5000), now_);
  EXPECT_EQ(Node("n1").ports_in_use(), 2);
  EXPECT_EQ(Node("n1").free_gpu_mask(), 0xeu) << "GPU 0 is busy with a process Trainyard did not start";
  EXPECT_EQ(Node("n1").data_free_mb(), 5000);
  v1::Heartbeat delta;
  delta.set_use_unchanged(true);
  for (int i = 1; i <= 3; ++i) state_->OnHeartbeat("n1", delta, now_ + absl::Seconds(i));
  v1::NodeView n = Node("n1");
  EXPECT_EQ(n.ports_in_use(), 2);
  EXPECT_EQ(n.free_gpu_mask(), 0xeu);
  EXPECT_EQ(n.data_free_mb(), 5000);
  EXPECT_EQ(n.last_heartbeat_unix_ms(), absl::ToUnixMillis(now_ + absl::Seconds(3)));
  delta.set_data_free_mb(4000);  // a delta carries a free disk that moved
  state_->OnHeartbeat("n1", delta, now_ + absl::Seconds(4));
  EXPECT_EQ(Node("n1").data_free_mb(), 4000);
  EXPECT_EQ(Node("n1").ports_in_use(), 2);
  state_->OnHeartbeat("n1", Full(0, {}, 4000), now_ + absl::Seconds(5));
  EXPECT_EQ(Node("n1").ports_in_use(), 0);
  EXPECT_EQ(Node("n1").free_gpu_mask(), 0xfu);
}

TEST_F(ControlHeartbeatTest, ANodesOwnPortChangeRebuildsOnlyItsView) {
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 4), 1, now_).ok());
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n2", 4), 2, now_).ok());
  ViewStore views;
  state_->PublishNodesAndQueues(&views, now_);
  ViewStore::NodesPtr before = views.Nodes();
  state_->OnHeartbeat("n2", Full(0, {30001}, 100), now_);
  state_->PublishNodesAndQueues(&views, now_);
  ViewStore::NodesPtr after = views.Nodes();
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ((*after)[0].view.get(), (*before)[0].view.get()) << "n1's view is shared, not rebuilt";
  EXPECT_NE((*after)[1].view.get(), (*before)[1].view.get());
  EXPECT_EQ((*after)[1].view->ports_in_use(), 1) << "n2's change goes out at once";
}

}  // namespace
}  // namespace trainyard::server
