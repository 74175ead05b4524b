#include "api/node_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

TEST(NodeAddressTest, TheAddressTowardALoopbackServerIsALoopbackAddress) {
  absl::StatusOr<std::string> local = LocalAddressToward("127.0.0.1:7451");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local, "127.0.0.1");
}

TEST(NodeAddressTest, AServerWithoutAPortIsNamed) {
  absl::StatusOr<std::string> local = LocalAddressToward("serverhost");
  ASSERT_FALSE(local.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(local.status()));
  EXPECT_THAT(local.status().message(), HasSubstr("'serverhost' is not host:port"));
}

TEST(NodeAddressTest, IpLiteralsAndLocalhostResolve) {
  EXPECT_TRUE(CheckAddressResolves("10.1.2.3").ok());
  EXPECT_TRUE(CheckAddressResolves("::1").ok());
  EXPECT_TRUE(CheckAddressResolves("localhost").ok());
}

TEST(NodeAddressTest, ANameNoResolverKnowsIsNamed) {
  // .invalid never resolves (RFC 6761).
  absl::Status st = CheckAddressResolves("hostb.invalid");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::IsNotFound(st));
  EXPECT_THAT(st.message(), HasSubstr("address 'hostb.invalid' does not resolve"));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckAddressResolves("")));
}

}  // namespace
}  // namespace trainyard::api
