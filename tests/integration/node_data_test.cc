// What a node keeps of one user's jobs, seen by the next: a new job of a
// deleted job's name shows only its own logs (and `logs -f` follows it to
// its end); a finished task's work dir goes after the agent's retention
// while its logs stay; a job master running as its user's account reads
// the cluster CA and its verdict reaches the server.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool NodeDataEnded(const std::string& state) { return state == "SUCCEEDED" || state == "FAILED" || state == "KILLED"; }

TEST(NodeDataTest, ANewJobOfADeletedJobsNameShowsOnlyItsOwnLogsAndIsFollowedToItsEnd) {
  Cluster c({.nodes = 1});
  std::string alice = c.UserToken("alice"), bob = c.UserToken("bob");
  ASSERT_FALSE(alice.empty());
  ASSERT_FALSE(bob.empty());
  WriteFile(c.dir() + "/a.yaml", R"(
name: leak
replicas:
  worker:
    command: [sh, -c, 'echo alice-secret-4711; echo alice-stderr >&2']
)");
  ASSERT_EQ(c.CliAs(alice, {"submit", c.dir() + "/a.yaml"}).exit_code, 0);
  ASSERT_TRUE(c.WaitForState("leak", "SUCCEEDED", absl::Seconds(60))) << c.Describe("leak").dump(2);
  ASSERT_THAT(c.CliAs(alice, {"logs", "leak", "worker/0"}).out, HasSubstr("alice-secret-4711"));
  CommandResult deleted = c.CliAs(alice, {"delete", "leak"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;

  // Bob's job of the same name writes a line, then waits for the test.
  std::string go = c.dir() + "/go";
  WriteFile(c.dir() + "/b.yaml", absl::StrCat(R"(
name: leak
replicas:
  worker:
    command: [sh, -c, 'echo bob-1; while [ ! -e )", go, R"( ]; do sleep 0.02; done; echo bob-2']
)"));
  ASSERT_EQ(c.CliAs(bob, {"submit", c.dir() + "/b.yaml"}).exit_code, 0);
  std::string out = c.dir() + "/follow.out";
  Process follow({"/usr/bin/env", "TRAINYARD_TOKEN=" + bob, TrainyardBin(), "logs", "leak", "worker/0", "-f", "--server",
                  c.address()},
                 out);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("bob-1\n") != std::string::npos; }, absl::Seconds(60)))
      << ReadFile(out);
  CommandResult logs = c.CliAs(bob, {"logs", "leak", "worker/0"});
  EXPECT_EQ(logs.out, "bob-1\n");
  EXPECT_THAT(logs.out + logs.err, Not(HasSubstr("alice")));
  // The old job's ended log does not end the follow of the new one.
  EXPECT_TRUE(follow.Running()) << ReadFile(out);
  WriteFile(go, "");
  ASSERT_TRUE(WaitUntil([&] { return !follow.Running(); }, absl::Seconds(60))) << ReadFile(out);
  EXPECT_EQ(ReadFile(out), "bob-1\nbob-2\n");
  EXPECT_EQ(c.JobState("leak"), "SUCCEEDED");
}

TEST(NodeDataTest, AFinishedTasksWorkDirGoesAfterTheRetentionAndItsLogsStayReadable) {
  Cluster c({.nodes = 1, .agent_flags = {"--task-dir-retention", "0"}});
  std::string job = c.Submit(R"(
name: scratch
replicas:
  worker:
    command: [sh, -c, 'head -c 1000000 /dev/zero > scratch.bin; echo wrote scratch in $PWD']
)");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  std::string work = absl::StrCat(c.dir(), "/node-0/work/job_", c.Describe(job).value("id", 0), "/worker-0");
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(work); }, absl::Seconds(30))) << work;
  EXPECT_EQ(c.Cli({"logs", job, "worker/0"}).out, absl::StrCat("wrote scratch in ", work, "\n"));
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(c.agent(0).log()).find("reclaimed 1 finished task work dir") !=
                                   std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(c.agent(0).log());
}

TEST(NodeDataTest, AJobMasterRunningAsItsUsersAccountFailsTheJobOfAFailedWorker) {
  if (geteuid() != 0) GTEST_SKIP() << "running tasks as other accounts needs an agent that is root";
  // The agent's CA sits in the cluster's 0700 certificate dir (the harness
  // passes it as `up` does); alice's tasks, her job master among them, run
  // as nobody (65534).
  Cluster c({.nodes = 1, .task_user_map = "alice: nobody\n"});
  chmod(c.dir().c_str(), 0711);  // tasks pass through to the agent's data dir, as under /var/lib
  std::string alice = c.UserToken("alice");
  WriteFile(c.dir() + "/fail.yaml", R"(
name: broken
replicas:
  worker:
    count: 2
    command: [sh, -c, 'if [ $TRAINYARD_INDEX -eq 0 ]; then id -u; exit 3; fi; sleep 600']
)");
  ASSERT_EQ(c.CliAs(alice, {"submit", c.dir() + "/fail.yaml"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return NodeDataEnded(c.JobState("broken")); }, absl::Seconds(90), absl::Milliseconds(200)))
      << c.Describe("broken").dump(2);
  EXPECT_EQ(c.JobState("broken"), "FAILED") << c.Describe("broken").dump(2);
  EXPECT_EQ(c.CliAs(alice, {"logs", "broken", "worker/0"}).out, "65534\n");
}

}  // namespace
}  // namespace trainyard::testing
