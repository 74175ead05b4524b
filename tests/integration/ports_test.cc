// Ports end to end: a second server on a running server's port refuses to
// start; ports in use on a node are not handed out; `trainyard up` gives
// every simulated node its own address and ports; a gang of tasks asking
// for the same fixed port starts across nodes.
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

TEST(PortsTest, SecondServerOnTheSamePortRefusesToStart) {
  ClusterOptions options;
  options.nodes = 1;
  Cluster c(options);
  TempDir other;
  CommandResult r = RunCli({"server", "--listen", c.address(), "--data-dir", other.path()}, absl::Seconds(20));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, -2) << "the second server kept running";
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("cannot bind ", c.address())));
  EXPECT_THAT(r.err, HasSubstr("in use"));
  // The first one still serves its node.
  EXPECT_EQ(c.Nodes().size(), 1u);
}

}  // namespace
}  // namespace trainyard::testing
