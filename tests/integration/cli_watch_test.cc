// `trainyard jobs -w` and `describe -w` against a real cluster: each prints
// again when the job views change, describe ends with its job, jobs goes
// on until it is stopped.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<Process> Watch(Cluster& c, const std::vector<std::string>& args, const std::string& out) {
  std::vector<std::string> argv = {TrainyardBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--server", c.address()});
  return std::make_unique<Process>(argv, out);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliWatchTest, JobsWatchPrintsTheListAgainAsAJobComesAndGoes) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string out = c.dir() + "/jobs.out", go = c.dir() + "/go";
  std::unique_ptr<Process> watch = Watch(c, {"jobs", "-w"}, out);
  // The first screen: no jobs yet, the header alone.
  ASSERT_TRUE(WaitUntil([&] { return Count(ReadFile(out), "NAME") == 1; }, absl::Seconds(10))) << ReadFile(out);
  std::string job = c.Submit(absl::StrCat(R"(
name: watched
replicas:
  worker:
    command: [sh, -c, ')", WaitForFile(go), R"(']
)"));
  ASSERT_TRUE(WaitUntil([&] {
    std::string text = ReadFile(out);
    return text.find(job) != std::string::npos && text.find("RUNNING") != std::string::npos;
  }, absl::Seconds(30))) << ReadFile(out);
  size_t screens = Count(ReadFile(out), "NAME");
  WriteFile(go, "");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED"));
  // The ended job leaves the list of live jobs: a last screen without it.
  ASSERT_TRUE(WaitUntil([&] {
    std::string text = ReadFile(out);
    size_t last = text.rfind("NAME");
    return Count(text, "NAME") > screens && text.find(job, last) == std::string::npos;
  }, absl::Seconds(10))) << ReadFile(out);
  EXPECT_TRUE(watch->Running());  // jobs -w goes on until it is stopped
  watch->Stop();
}

TEST(CliWatchTest, DescribeWatchFollowsTheJobToItsEndAndExits) {
  Cluster c({.nodes = 1});
  std::string out = c.dir() + "/describe.out", go = c.dir() + "/go";
  std::string job = c.Submit(absl::StrCat(R"(
name: described
replicas:
  worker:
    command: [sh, -c, ')", WaitForFile(go), R"(']
)"));
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  std::unique_ptr<Process> watch = Watch(c, {"describe", job, "-w"}, out);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("State:      RUNNING") != std::string::npos; },
                      absl::Seconds(10))) << ReadFile(out);
  EXPECT_TRUE(watch->Running());
  WriteFile(go, "");
  ASSERT_TRUE(WaitUntil([&] { return !watch->Running(); }, absl::Seconds(30))) << ReadFile(out);
  std::string text = ReadFile(out);
  EXPECT_THAT(text.substr(text.rfind("Name:")), HasSubstr("State:      SUCCEEDED"));
  EXPECT_GE(Count(text, "Name:       " + job), 2u);
}

TEST(CliWatchTest, DescribeWatchOfAnUnknownJobSaysSo) {
  Cluster c({.nodes = 1});
  CommandResult r = c.Cli({"describe", "nosuch", "-w"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("nosuch"));
}

// A watch given an address where no server ever answered fails at once: it
// waits for a server to come back (cli/failover.h) only after one answered.
TEST(CliWatchTest, AWatchOfAnAddressNoServerAnswersFailsAtOnce) {
  const std::string nowhere = absl::StrCat("127.0.0.1:", FreePort());
  // Well before the minute it would wait for a server that went away.
  CommandResult r = RunCli({"jobs", "-w", "--server", nowhere}, absl::Seconds(50));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(nowhere));
  EXPECT_THAT(r.err, Not(HasSubstr("asking the servers again")));
}

}  // namespace
}  // namespace trainyard::testing
