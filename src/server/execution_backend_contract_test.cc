// The ExecutionBackend contract, run against every backend the server can
// hand the control state (as the store's suite runs against every store):
// orders reach the connection whose registration was last accepted for the
// node they name, in the order given, as given; an order for a node with no
// connection is dropped at once (never kept for a later one, never
// blocking); log reads and exec sessions reach their node, or say
// the node has no connection; sealed secrets are opened by the launch
// contract in front of a transport, and by nothing else. A new backend adds its Fixture
// below.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/task_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/agent_streams.h"
#include "server/launch_contract.h"

namespace trainyard::server {
namespace {

// What a node's agent receives, in order.
class RecordedLink : public AgentLink {
 public:
  void Send(v1::ServerMessage msg) override { got.push_back(std::move(msg)); }
  std::vector<v1::ServerMessage> got;
};

// One backend under test, with a way to open and close a connection (named
// by the test) and read what it got.
class Fixture {
 public:
  virtual ~Fixture() = default;
  virtual ExecutionBackend* backend() = 0;
  // The connection's session number, for its registration (Registered).
  virtual uint64_t Open(const std::string& conn) = 0;
  virtual void Close(const std::string& conn) = 0;
  virtual const std::vector<v1::ServerMessage>& Received(const std::string& conn) = 0;
};

// Agents over gRPC streams, as the server sends to them (each stream's
// reactor is an AgentLink, opened and closed by the agent service).
class StreamsFixture : public Fixture {
 public:
  ExecutionBackend* backend() override { return &streams_; }
  uint64_t Open(const std::string& conn) override { return streams_.Open(&links_[conn]); }
  void Close(const std::string& conn) override { streams_.Close(&links_[conn]); }
  const std::vector<v1::ServerMessage>& Received(const std::string& conn) override { return links_[conn].got; }

 protected:
  AgentStreams streams_;
  std::map<std::string, RecordedLink> links_;
};

// What the control state is given: the streams behind the launch contract.
class ContractFixture : public StreamsFixture {
 public:
  ContractFixture() { secrets_.SetSecretOpener([](const std::string& sealed) { return "opened:" + sealed; }); }
  ExecutionBackend* backend() override { return &contract_; }

 private:
  TaskSecrets secrets_;
  LaunchContract contract_{&streams_, &secrets_};
};

struct Backend {
  std::string name;
  std::function<std::unique_ptr<Fixture>()> make;
  bool opens_secrets;  // the launch contract in front
};

class ExecutionBackendContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<Fixture> f_ = GetParam().make();
  ExecutionBackend& backend() { return *f_->backend(); }
  // Connection `conn` opens and its registration of `node` is accepted.
  void Connect(const std::string& node, const std::string& conn = "") {
    v1::Registered ack;
    ack.set_node(node);
    ack.set_heartbeat_interval_ms(1000);
    backend().Registered(node, f_->Open(conn.empty() ? node : conn), ack);
  }
};

v1::TaskSpec Task(const std::string& job, int index) {
  v1::TaskSpec t;
  t.set_job(job);
  t.set_job_id(7);
  t.set_role("worker");
  t.set_index(index);
  t.set_attempt(2);
  t.add_command("train");
  (*t.mutable_env())["RANK"] = std::to_string(index);
  (*t.mutable_files())["hosts"] = "n1\nn2\n";
  t.mutable_allocation()->set_gpus(1);
  t.mutable_allocation()->set_gpu_mask(uint64_t{1} << index);
  return t;
}

TEST_P(ExecutionBackendContractTest, OrdersReachTheNodeTheyNameInTheOrderGivenAsGiven) {
  Connect("n1");
  Connect("n2");
  v1::KillTask kill;
  kill.set_job("j");
  kill.set_role("worker");
  kill.set_grace_ms(500);
  v1::TaskFiles files;
  files.set_job("j");
  (*files.mutable_files())["hosts"] = "n1\n";
  backend().Launch("n1", Task("j", 0));
  backend().UpdateFiles("n1", files);
  backend().Kill("n1", kill);
  backend().Drained("n1");
  backend().Launch("n2", Task("j", 1));

  const std::vector<v1::ServerMessage>& n1 = f_->Received("n1");
  ASSERT_EQ(n1.size(), 5u);
  EXPECT_EQ(n1[0].registered().heartbeat_interval_ms(), 1000);
  ASSERT_TRUE(n1[1].has_launch());
  EXPECT_EQ(n1[1].launch().SerializeAsString(), Task("j", 0).SerializeAsString()) << "a launch arrives as it was given";
  ASSERT_TRUE(n1[2].has_update_files());
  EXPECT_EQ(n1[2].update_files().files().at("hosts"), "n1\n");
  ASSERT_TRUE(n1[3].has_kill());
  EXPECT_EQ(n1[3].kill().grace_ms(), 500);
  EXPECT_TRUE(n1[4].has_drained());
  const std::vector<v1::ServerMessage>& n2 = f_->Received("n2");
  ASSERT_EQ(n2.size(), 2u);
  EXPECT_EQ(n2[0].registered().node(), "n2") << "the answer to its registration comes first";
  EXPECT_EQ(n2[1].launch().index(), 1);
  EXPECT_EQ(backend().Connected(), 2u);
}

TEST_P(ExecutionBackendContractTest, ANodeThatRegistersAgainGetsItsOrdersOnTheNewConnectionAndTheOldOnesCloseLeavesIt) {
  Connect("n1", "first");
  uint64_t refused = f_->Open("refused");  // a registration the control state refused: never told
  Connect("n1", "second");
  EXPECT_NE(f_->Open("first"), f_->Open("second")) << "each connection has its own session";
  EXPECT_EQ(f_->Open("second"), f_->Open("second")) << "and keeps it";
  EXPECT_NE(refused, 0u);
  backend().Launch("n1", Task("j", 0));
  f_->Close("first");  // the old stream's end comes after the new one registered
  backend().Launch("n1", Task("j", 1));
  ASSERT_EQ(f_->Received("first").size(), 1u);  // its registration's answer only
  EXPECT_TRUE(f_->Received("refused").empty());
  const std::vector<v1::ServerMessage>& second = f_->Received("second");
  ASSERT_EQ(second.size(), 3u);
  EXPECT_TRUE(second[0].has_registered());
  EXPECT_EQ(second[1].launch().index(), 0);
  EXPECT_EQ(second[2].launch().index(), 1);
  EXPECT_EQ(backend().Connected(), 1u);

  f_->Close("second");
  backend().Launch("n1", Task("j", 2));
  EXPECT_EQ(f_->Received("second").size(), 3u) << "nothing reaches a closed connection";
  EXPECT_EQ(backend().Connected(), 0u);
  v1::Registered late;
  backend().Registered("n1", f_->Open("gone"), late);
  f_->Close("gone");
  backend().Registered("n1", 987654, late);  // a session no connection has
  backend().Launch("n1", Task("j", 3));
  EXPECT_EQ(f_->Received("gone").size(), 1u);
  EXPECT_EQ(backend().Connected(), 0u);
}

TEST_P(ExecutionBackendContractTest, AnOrderForANodeWithNoConnectionIsDroppedNotKeptForLater) {
  backend().Launch("n3", Task("j", 0));
  v1::KillTask kill;
  kill.set_job("j");
  backend().Kill("n3", kill);
  Connect("n3");
  ASSERT_EQ(f_->Received("n3").size(), 1u) << "the control state sends again what a node that registers still needs";
  EXPECT_TRUE(f_->Received("n3")[0].has_registered());
  backend().Launch("n3", Task("j", 1));
  ASSERT_EQ(f_->Received("n3").size(), 2u);
  EXPECT_EQ(f_->Received("n3")[1].launch().index(), 1);
}

TEST_P(ExecutionBackendContractTest, SealedSecretsAreOpenedByTheContractInFrontAndNothingElse) {
  Connect("n1");
  v1::TaskSpec t = Task("j", 0);
  (*t.mutable_secret_env())["WANDB_KEY"] = "sealed-value";
  backend().Launch("n1", t);
  ASSERT_EQ(f_->Received("n1").size(), 2u);
  const v1::TaskSpec& got = f_->Received("n1")[1].launch();
  if (GetParam().opens_secrets) {
    EXPECT_EQ(got.secret_env_size(), 0);
    EXPECT_EQ(got.env().at("WANDB_KEY"), "opened:sealed-value");
  } else {
    // A bare transport carries what it is given: the contract in front of
    // it is what opens secrets, and the server always puts it there
    // (JobManager's contract_).
    EXPECT_EQ(got.secret_env().at("WANDB_KEY"), "sealed-value");
  }
}

TEST_P(ExecutionBackendContractTest, LogAndExecOrdersReachTheirNodeAndANodeWithNoConnectionSaysSo) {
  Connect("n1");
  v1::LogRead read;
  read.set_request_id(9);
  read.set_job("j");
  v1::LogAck ack;
  ack.set_request_id(9);
  ack.set_offset(4096);
  v1::LogCancel cancel;
  cancel.set_request_id(9);
  v1::ExecOpen open;
  open.set_request_id(10);
  open.add_command("nvidia-smi");
  v1::ExecInput input;
  input.set_request_id(10);
  input.set_close(true);
  EXPECT_TRUE(backend().ReadLog("n1", read));
  EXPECT_TRUE(backend().AckLog("n1", ack));
  EXPECT_TRUE(backend().CancelLog("n1", cancel));
  EXPECT_TRUE(backend().OpenExec("n1", open));
  EXPECT_TRUE(backend().ExecInput("n1", input));
  const std::vector<v1::ServerMessage>& n1 = f_->Received("n1");
  ASSERT_EQ(n1.size(), 6u);
  EXPECT_EQ(n1[1].read_log().job(), "j");
  EXPECT_EQ(n1[2].ack_log().offset(), 4096);
  EXPECT_EQ(n1[3].cancel_log().request_id(), 9u);
  EXPECT_EQ(n1[4].exec_open().command(0), "nvidia-smi");
  EXPECT_TRUE(n1[5].exec_input().close());
  EXPECT_FALSE(backend().ReadLog("n9", read)) << "the hub ends or moves a stream whose node has no connection";
  EXPECT_FALSE(backend().OpenExec("n9", open));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, ExecutionBackendContractTest,
    ::testing::Values(Backend{"AgentStreams", [] { return std::make_unique<StreamsFixture>(); }, false},
                      Backend{"LaunchContractOverAgentStreams", [] { return std::make_unique<ContractFixture>(); }, true}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace trainyard::server
