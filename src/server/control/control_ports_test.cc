// ControlState and ports: the range a node serves (its agent's, the
// server's default, or 1024-65535 minus the node's ephemeral range), ports
// its agent reports in use (at registration and in heartbeats) never given
// to a task, and ports a task left kept from the next ones for a while.
#include "absl/strings/str_cat.h"
#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/test_backend.h"
#include "server/control/control_state.h"
#include "server/control/test_node.h"

namespace trainyard::server {
namespace {

void AddRange(google::protobuf::RepeatedPtrField<v1::PortRange>* to, uint32_t begin, uint32_t end) {
  v1::PortRange* r = to->Add();
  r->set_begin(begin);
  r->set_end(end);
}

constexpr char kOnePort[] = R"(
name: p
replicas:
  worker:
    count: 1
    resources: {cpu: 1, memory: 1Gi, ports: 1}
    command: [serve]
)";

class ControlPortsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.jobmaster_enabled = false;
    config_.port_quarantine_ms = 60000;
    core::SchedulerOptions options;
    options.port_quarantine = absl::Milliseconds(config_.port_quarantine_ms);
    state_ = std::make_unique<ControlState>(config_, core::Scheduler::Create(options).value(), &backend_, now_);
    state_->Recover(StoreSnapshot{}, {}, now_);
  }

  // Submits kOnePort, runs a round and returns the ports the task was
  // launched with ("" when it was not launched).
  std::string RunOne() {
    auto spec = api::LoadJobSpec(kOnePort, config_.limits);
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto prepared = state_->PrepareSubmit(*spec, now_);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    EXPECT_TRUE(state_->AcceptCommitted(*prepared, absl::OkStatus()).ok());
    size_t before = backend_.launches.size();
    state_->RunRound(now_);
    if (backend_.launches.size() == before) return "";
    return backend_.launches.back().second.env().at("TRAINYARD_PORTS");
  }

  void End(const v1::TaskSpec& t) {
    v1::TaskStatus st;
    st.set_job(t.job());
    st.set_role(t.role());
    st.set_index(t.index());
    st.set_attempt(t.attempt());
    st.set_state(v1::TASK_SUCCEEDED);
    state_->OnTaskStatus("n1", st, now_);
  }

  ServerConfig config_;
  testing::RecordingBackend backend_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<ControlState> state_;
};

TEST_F(ControlPortsTest, PortsInUseAtRegistrationAreNotGiven) {
  v1::NodeInfo n = testing::TestNode("n1", 0);
  AddRange(n.mutable_ports_in_use(), 30000, 30001);
  AddRange(n.mutable_ports_in_use(), 45000, 45000);  // outside the node's range
  ASSERT_TRUE(state_->RegisterAgent(n, 1, now_).ok());
  EXPECT_EQ(RunOne(), "30002");
}

TEST_F(ControlPortsTest, PortsInUseInAHeartbeatAreNotGivenAndFreedOnesCool) {
  ASSERT_TRUE(state_->RegisterAgent(testing::TestNode("n1", 0), 1, now_).ok());
  v1::Heartbeat hb;
  AddRange(hb.mutable_ports_in_use(), 30000, 30000);  // TIME_WAIT of some earlier program
  state_->OnHeartbeat("n1", hb, now_);
  EXPECT_EQ(RunOne(), "30001");
  End(backend_.launches.back().second);
  // The agent no longer lists 30000 (its TIME_WAIT is over) nor 30001 (the
  // task's socket closed): 30000 goes out; 30001 cools for a minute.
  state_->OnHeartbeat("n1", v1::Heartbeat(), now_);
  EXPECT_EQ(RunOne(), "30000");
  EXPECT_EQ(RunOne(), "30002");
  now_ += absl::Seconds(61);
  state_->OnHeartbeat("n1", v1::Heartbeat(), now_);
  EXPECT_EQ(RunOne(), "30001");
}

TEST_F(ControlPortsTest, WithoutAConfiguredRangeANodeServesAllButPrivilegedAndEphemeralPorts) {
  v1::NodeInfo n = testing::TestNode("n1", 0);
  n.mutable_capacity()->clear_ports();
  AddRange(n.mutable_ephemeral_ports(), 1024, 32767);
  ASSERT_TRUE(state_->RegisterAgent(n, 1, now_).ok());
  std::vector<v1::NodeView> nodes = state_->ListNodes();
  ASSERT_EQ(nodes.size(), 1u);
  ASSERT_EQ(nodes[0].info().capacity().ports_size(), 1);
  EXPECT_EQ(nodes[0].info().capacity().ports(0).begin(), 32768u);
  EXPECT_EQ(nodes[0].info().capacity().ports(0).end(), 65535u);
  EXPECT_EQ(RunOne(), "32768");
}

TEST_F(ControlPortsTest, AConfiguredRangeIsServedEvenWhereItOverlapsTheEphemeralRange) {
  v1::NodeInfo n = testing::TestNode("n1", 0);  // 30000-30999
  AddRange(n.mutable_ephemeral_ports(), 30000, 60999);
  ASSERT_TRUE(state_->RegisterAgent(n, 1, now_).ok());
  EXPECT_EQ(RunOne(), "30000");
}

}  // namespace
}  // namespace trainyard::server
