#include "api/agent_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(AgentAddressTest, IsThePortAboveOnTheSameHost) {
  EXPECT_EQ(DerivedAgentAddress("127.0.0.1:7450").value(), "127.0.0.1:7451");
  EXPECT_EQ(DerivedAgentAddress("[::1]:7450").value(), "[::1]:7451");
  EXPECT_EQ(DerivedAgentAddress("server.example:9000").value(), "server.example:9001");
  EXPECT_EQ(DerivedAgentAddress("0.0.0.0:0").value(), "0.0.0.0:0");
  EXPECT_EQ(DerivedAgentAddress("unix:/run/ty.sock").value(), "unix:/run/ty.sock.agents");
}

TEST(AgentAddressTest, RefusesWhatHasNoPortAbove) {
  EXPECT_FALSE(DerivedAgentAddress("127.0.0.1").ok());
  EXPECT_FALSE(DerivedAgentAddress("127.0.0.1:x").ok());
  EXPECT_FALSE(DerivedAgentAddress("127.0.0.1:65535").ok());
}

TEST(AgentAddressTest, OfAListIsTheAgentAddressOfEach) {
  EXPECT_EQ(*DerivedAgentAddresses("10.0.0.1:7450,10.0.0.2:7460"), "10.0.0.1:7451,10.0.0.2:7461");
}

}  // namespace
}  // namespace trainyard::api
