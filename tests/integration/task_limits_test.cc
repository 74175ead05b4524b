// What `describe` (and the REST job view) says about the limits a task's
// node enforces: an agent with no writable cgroup (pointed at an empty
// --cgroup-root) runs tasks unconfined and says so per task, and a job
// master — a program that maps far more than it uses — runs there rather
// than crash-looping under an address-space limit; an agent that may write
// cgroups (root, on this machine's hierarchy) names the cgroup that
// enforces each limit.
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr char kTaskLimitsSpec[] = R"(name: limited
replicas:
  worker:
    resources: {cpu: 500m, memory: 64Mi}
    command: [sh, -c, 'echo ok']
)";

TEST(TaskLimitsTest, WithoutWritableCgroupsDescribeSaysTheLimitsAreNotEnforced) {
  TempDir empty;  // no cgroup hierarchy here
  Cluster c({.nodes = 1, .agent_flags = {"--cgroup-root", empty.path()}});
  std::string job = c.Submit(kTaskLimitsSpec);
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  CommandResult d = c.Cli({"describe", job});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr("\nLimits (as each task's node enforces them):\n"));
  EXPECT_THAT(d.out, HasSubstr("  limited-worker-0: memory 64Mi: not enforced, cpu 500m: not enforced, pids 4096: "
                               "not enforced (no writable cgroup: no cgroup v2 hierarchy at " + empty.path()));
  // The job's master (which maps far more than it uses) ran unconfined too,
  // and ended with its job rather than crash-looping.
  EXPECT_THAT(d.out, HasSubstr("  master: memory 64Mi: not enforced"));
  EXPECT_THAT(d.out, HasSubstr("(stopped with the job)"));
  HttpResult view = HttpGet(c.http_address(), "/api/v1/jobs/" + job);
  ASSERT_EQ(view.status, 200) << view.body;
  nlohmann::json limits;
  for (const auto& t : view.json["tasks"]) {
    if (t.value("name", "") == "limited-worker-0") limits = t["limits"];
  }
  ASSERT_TRUE(limits.is_object()) << view.body;
  EXPECT_EQ(limits.value("memory_mb", 0), 64);
  EXPECT_EQ(limits.value("memory_by", "?"), "");
  EXPECT_EQ(limits.value("vcores_milli", 0), 500);
  EXPECT_THAT(limits.value("why_not", ""), HasSubstr("no writable cgroup"));
  EXPECT_THAT(limits.value("text", ""), HasSubstr("memory 64Mi: not enforced"));
  // The agent said so when it started.
  EXPECT_THAT(ReadFile(c.dir() + "/node-0.log"), HasSubstr("task confinement: memory: not enforced"));
}

TEST(TaskLimitsTest, WithCgroupsDescribeNamesWhatEnforcesEachLimit) {
  if (geteuid() != 0) GTEST_SKIP() << "the agent can write cgroups only as root here";
  Cluster c({.nodes = 1});
  std::string job = c.Submit(kTaskLimitsSpec);
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  CommandResult d = c.Cli({"describe", job});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, ContainsRegex("limited-worker-0: memory 64Mi \\(cgroup v[12]\\), cpu 500m \\(cgroup v[12] "
                                   "quota\\), pids 4096 \\(cgroup v[12]\\)"));
}

}  // namespace
}  // namespace trainyard::testing
