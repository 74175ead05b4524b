// Failure classes end to end: a server and an agent as processes, a worker
// that fails once and then succeeds; `describe` shows the failed attempt
// with its class and exit code, and the restart budgets left per class.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(FailureClassesTest, AFailedAttemptIsShownWithItsClassAndTheBudgetsLeft) {
  Cluster c({.nodes = 1});
  std::string counter = c.dir() + "/count";
  std::string job = c.Submit(absl::StrCat(R"(
name: once
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 2
    restartBudgets: {oom: 1}
    command: [sh, -c, 'if [ -e )", counter, R"( ]; then exit 0; fi; touch )", counter, R"(; exit 1']
)"));
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  nlohmann::json worker;
  for (const auto& t : d["tasks"]) {
    if (t["role"] == "worker") worker = t;
  }
  ASSERT_EQ(worker["attempts"].size(), 2u) << d.dump(2);
  EXPECT_EQ(worker["attempts"][0]["attempt_class"], "FAILED");
  EXPECT_EQ(worker["attempts"][0]["exit_code"], 1);
  EXPECT_EQ(worker["attempts"][0]["restarted"], true);
  EXPECT_EQ(worker["attempts"][1]["attempt_class"], "SUCCEEDED");
  ASSERT_EQ(worker["budgets"].size(), 5u) << d.dump(2);
  EXPECT_EQ(worker["budgets"][0]["attempt_class"], "FAILED");
  EXPECT_EQ(worker["budgets"][0]["left"], 1);
  EXPECT_EQ(worker["budgets"][1]["attempt_class"], "OOM_KILLED");
  EXPECT_EQ(worker["budgets"][1]["left"], 1);
  EXPECT_EQ(worker["budgets"][3]["attempt_class"], "GPU_ERROR");
  EXPECT_EQ(worker["budgets"][3]["limit"], -1);
  EXPECT_EQ(worker["budgets"][4]["attempt_class"], "PREEMPTED");
  EXPECT_EQ(worker["budgets"][4]["limit"], -1);

  CommandResult text = c.Cli({"describe", job});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, MatchesRegex("(.|\n)*once-worker-0 +0 +FAILED +code 1 +[^ ]+ +restarted(.|\n)*"));
  EXPECT_THAT(text.out, HasSubstr("once-worker-0: failure budget 1 of 2 left, OOM budget 1 of 1 left, "
                                  "node-loss budget unlimited"));
  EXPECT_THAT(text.out, HasSubstr("once-worker-0 attempt 0 FAILED (exit code 1), restarting as attempt 1 "
                                  "(failure budget 1 of 2 left)"));
}

// restartBudgets.preemption: 0: the job's first preemption ends it FAILED,
// saying so, and the production job that wanted its GPUs runs.
TEST(FailureClassesTest, AJobWithNoPreemptionsLeftFailsWhenPreemptedAndItsRoomGoesToThePreemptor) {
  Cluster c({.nodes = 1});
  std::string low = c.Submit(R"(
name: fragile
priority: ptr
replicas:
  worker:
    resources: {gpus: 8}
    restartBudgets: {preemption: 0}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_TRUE(c.WaitForState(low, "RUNNING")) << c.Describe(low).dump(2);
  CommandResult before = c.Cli({"describe", low});
  EXPECT_THAT(before.out, MatchesRegex("(.|\n)*fragile-worker-0: [^\n]*, preemption budget 0 of 0 left\n(.|\n)*"))
      << before.out;
  std::string urgent = c.Submit(R"(
name: urgent
priority: production
replicas:
  worker:
    resources: {gpus: 8}
    command: [sh, -c, 'sleep 1']
)");
  ASSERT_TRUE(c.WaitForState(low, "FAILED")) << c.Describe(low).dump(2);
  EXPECT_THAT(c.Describe(low)["reason"].get<std::string>(),
              MatchesRegex("task fragile-worker-0 was preempted by job urgent \\(priority production\\) at [-0-9T:]+Z "
                           "\\(PREEMPTED; preemption budget 0 of 0 left\\)"));
  ASSERT_TRUE(c.WaitForState(urgent, "SUCCEEDED")) << c.Describe(urgent).dump(2);
}

}  // namespace
}  // namespace trainyard::testing
