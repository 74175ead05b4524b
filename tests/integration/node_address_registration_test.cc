// A node's address as other nodes' tasks use it (MASTER_ADDR, the hosts
// file): an agent joined without --address takes the address it reaches the
// server from, never its node name; an address the server cannot resolve is
// refused at registration with the reason on the agent's terminal.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// An agent for node `name` of `cluster`, started as a user would: --server
// and its certificate only, then `more`.
std::unique_ptr<Process> StartAgent(Cluster& cluster, const std::string& name, const std::vector<std::string>& more) {
  std::vector<std::string> argv{TrainyardBin(), "agent",         "--server",      cluster.address(),
                                "--agent-server", cluster.agent_address(), "--name", name,
                                "--data-dir",    cluster.dir() + "/" + name, "--simulate-gpus", "2",
                                "--memory-mb",   "4096",        "--vcores",      "4",
                                "--kill-tasks-on-exit"};
  std::vector<std::string> tls = AgentTlsFlags(name);
  argv.insert(argv.end(), tls.begin(), tls.end());
  argv.insert(argv.end(), more.begin(), more.end());
  return std::make_unique<Process>(argv, absl::StrCat(cluster.dir(), "/", name, ".log"));
}

TEST(NodeAddressRegistrationTest, AnAgentWithoutAddressIsReachedOnItsAddressTowardTheServer) {
  Cluster cluster({.nodes = 1});
  std::unique_ptr<Process> agent = StartAgent(cluster, "hostb", {});
  nlohmann::json node;
  ASSERT_TRUE(WaitUntil(
      [&] {
        node = NodeNamed(cluster, "hostb");
        return !node.empty() && node["info"].value("state", "").find("READY") != std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(50)))
      << ReadFile(agent->log());
  // The server is on 127.0.0.1: that is where the agent reached it from.
  EXPECT_EQ(node["info"].value("address", ""), "127.0.0.1") << node.dump();
  agent->Stop();
}

TEST(NodeAddressRegistrationTest, AnAddressTheServerCannotResolveIsRefusedWithTheReason) {
  Cluster cluster({.nodes = 1});
  // .invalid never resolves (RFC 6761), as a host name no DNS knows.
  std::unique_ptr<Process> agent = StartAgent(cluster, "hostc", {"--address", "hostc.invalid"});
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(agent->log()).find("does not resolve") != std::string::npos; },
                        absl::Seconds(30), absl::Milliseconds(50)))
      << ReadFile(agent->log());
  std::string log = ReadFile(agent->log());
  EXPECT_THAT(log, HasSubstr("node hostc: address 'hostc.invalid' does not resolve"));
  EXPECT_THAT(log, HasSubstr("--address"));
  nlohmann::json node = NodeNamed(cluster, "hostc");
  EXPECT_TRUE(node.empty() || node["info"].value("state", "").find("READY") == std::string::npos) << node.dump();
  agent->Stop();
}

}  // namespace
}  // namespace trainyard::testing
