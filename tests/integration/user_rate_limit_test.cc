// Per-user rate limits on the server's expensive calls (config block
// rateLimits): a user over the limit is answered RESOURCE_EXHAUSTED naming
// it, while another user, and the admin, are still served; /metrics counts
// the refusal.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

TEST(UserRateLimitTest, AUserOverTheLimitIsRefusedAndAnotherUserIsStillServed) {
  TempDir config_dir;
  std::string config = config_dir.path() + "/server.yaml";
  // One listing per user, then one every 1000 s: the second is over the limit
  // however slowly this machine runs the CLI.
  WriteFile(config, "rateLimits:\n  listJobs: 0.001\n  burstSeconds: 1\n");
  Cluster c({.nodes = 1, .server_flags = {"--config", config}});
  std::string alice = c.UserToken("alice");
  std::string bob = c.UserToken("bob");
  ASSERT_FALSE(alice.empty());
  ASSERT_FALSE(bob.empty());

  CommandResult first = c.CliAs(alice, {"jobs"});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  CommandResult second = c.CliAs(alice, {"jobs"});
  EXPECT_NE(second.exit_code, 0) << second.out;
  EXPECT_THAT(second.err, HasSubstr("rateLimits.listJobs"));
  EXPECT_THAT(second.err, HasSubstr("alice"));

  CommandResult other = c.CliAs(bob, {"jobs"});
  EXPECT_EQ(other.exit_code, 0) << other.err;
  CommandResult admin = c.Cli({"jobs"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_GE(ServerMetric(c, "trainyard_user_rate_limited_total{call=\"listJobs\"}"), 1);
  EXPECT_GE(ServerMetric(c, "trainyard_grpc_requests_total{method=\"ListJobs\",code=\"RESOURCE_EXHAUSTED\"}"), 1);
}

}  // namespace
}  // namespace trainyard::testing
