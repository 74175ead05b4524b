#include "common/server_list.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard {
namespace {

TEST(ServerListTargetTest, AListOfAddressesIsOneTargetAndANameInAListIsRefused) {
  EXPECT_EQ(*ServerListTarget("10.0.0.1:7450"), "10.0.0.1:7450");
  EXPECT_EQ(*ServerListTarget("host-a:7450"), "host-a:7450");
  EXPECT_EQ(*ServerListTarget("10.0.0.1:7450,10.0.0.2:7450"), "ipv4:10.0.0.1:7450,10.0.0.2:7450");
  EXPECT_EQ(*ServerListTarget("[::1]:7450,[::1]:7460"), "ipv6:[::1]:7450,[::1]:7460");
  absl::StatusOr<std::string> named = ServerListTarget("10.0.0.1:7450,host-b:7450");
  ASSERT_FALSE(named.ok());
  EXPECT_THAT(std::string(named.status().message()), ::testing::HasSubstr("'host-b' is not an IP address"));
  EXPECT_FALSE(ServerListTarget("10.0.0.1:7450,[::1]:7450").ok());
  EXPECT_FALSE(ServerListTarget("10.0.0.1:7450,10.0.0.2").ok());
}

TEST(ServerListTargetTest, CheckServerListWantsEveryEntryAnAddressWithAPortOneOrMany) {
  EXPECT_EQ(*CheckServerList("10.0.0.1:7450"), "ipv4");
  EXPECT_EQ(*CheckServerList("[fd00::1]:7450,[fd00::2]:7450"), "ipv6");
  for (const char* bad : {"10.0.0.1", "10.0.0.1:7450 10.0.0.2:7450", "10.0.0.1:7450,", "host-a:7450", "",
                          "10.0.0.1:7450,[::1]:7450", "10.0.0.1:0"}) {
    EXPECT_FALSE(CheckServerList(bad).ok()) << bad;
  }
}

TEST(ServerListTargetTest, TheServerLastReachedGoesLastTheOthersKeepTheirOrder) {
  const std::string list = "10.0.0.1:7451,10.0.0.2:7451,10.0.0.3:7451";
  EXPECT_EQ(ServerListWithLast(list, "10.0.0.1:7451"), "10.0.0.2:7451,10.0.0.3:7451,10.0.0.1:7451");
  EXPECT_EQ(ServerListWithLast(list, "10.0.0.2:7451"), "10.0.0.1:7451,10.0.0.3:7451,10.0.0.2:7451");
  EXPECT_EQ(ServerListWithLast(list, "10.0.0.3:7451"), list);
  EXPECT_EQ(ServerListWithLast(list, "10.0.0.9:7451"), list);
  EXPECT_EQ(ServerListWithLast(list, ""), list);
  EXPECT_EQ(ServerListWithLast("10.0.0.1:7451", "10.0.0.1:7451"), "10.0.0.1:7451");
  // The server writes IPv6 as inet_ntop does; the list may not.
  EXPECT_EQ(ServerListWithLast("[FD00:0::1]:7451,[fd00::2]:7451", "[fd00::1]:7451"), "[fd00::2]:7451,[FD00:0::1]:7451");
}

}  // namespace
}  // namespace trainyard
