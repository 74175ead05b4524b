#include "agent/peer_addresses.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;

TEST(PeerAddressesTest, ResolvableAddressesPass) {
  EXPECT_TRUE(CheckPeerAddresses("127.0.0.2 ddp-master-0\n127.0.0.3 ddp-worker-0\nlocalhost ddp-worker-1\n", "a").ok());
  EXPECT_TRUE(CheckPeerAddresses("", "a").ok());
}

TEST(PeerAddressesTest, AnUnresolvableAddressNamesItsTaskAndThisNode) {
  absl::Status st = CheckPeerAddresses("127.0.0.2 ddp-master-0\nhostb.invalid ddp-worker-0\n", "hosta");
  ASSERT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("task ddp-worker-0's address 'hostb.invalid' does not resolve"));
  EXPECT_THAT(st.message(), HasSubstr("on node hosta"));
  EXPECT_THAT(st.message(), HasSubstr("--address"));
}

}  // namespace
}  // namespace trainyard::agent
