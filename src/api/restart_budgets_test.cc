// restartBudgets in a spec (each problem named with its field and reason),
// and the budgets' rules: defaults per class, spending, the texts shown.
#include "api/restart_budgets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

constexpr char kRestartBudgetsRole[] = "name: j\nreplicas:\n  worker:\n    command: [x]\n";

absl::StatusOr<v1::JobSpec> RestartBudgetsLoad(const std::string& lines) { return LoadJobSpec(absl::StrCat(kRestartBudgetsRole, lines), {}); }

std::string RestartBudgetsRefusal(const std::string& lines) {
  absl::StatusOr<v1::JobSpec> spec = RestartBudgetsLoad(lines);
  return spec.ok() ? "" : std::string(spec.status().message());
}

TEST(RestartBudgetsSpec, ReadsCountsAndUnlimited) {
  absl::StatusOr<v1::JobSpec> spec = RestartBudgetsLoad("    restartBudgets: {oom: 1, nodeLost: unlimited, gpuError: 2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::RestartBudgets& b = spec->replicas(0).restart_budgets();
  EXPECT_EQ(b.oom(), 1);
  EXPECT_EQ(b.node_lost(), kUnlimitedRestarts);
  EXPECT_EQ(b.gpu_error(), 2);
  EXPECT_EQ(RestartLimit(spec->replicas(0), v1::ATTEMPT_GPU_ERROR), 2);
  EXPECT_EQ(BudgetText(spec->replicas(0), v1::RestartCounts(), v1::ATTEMPT_GPU_ERROR), "GPU-error budget 2 of 2 left");
}

TEST(RestartBudgetsSpec, PreemptionsAreUnlimitedUnlessCountedUnderEveryPolicy) {
  absl::StatusOr<v1::JobSpec> spec = RestartBudgetsLoad("    restartPolicy: Never\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // Under Never a lost node ends the job; a preemption requeues it whole.
  EXPECT_EQ(RestartLimit(spec->replicas(0), v1::ATTEMPT_NODE_LOST), 0);
  EXPECT_EQ(RestartLimit(spec->replicas(0), v1::ATTEMPT_PREEMPTED), kUnlimitedRestarts);
  spec = RestartBudgetsLoad("    restartBudgets: {preemption: 2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::RestartCounts counts;
  SpendRestart(&counts, v1::ATTEMPT_PREEMPTED);
  EXPECT_EQ(counts.preemption(), 1);
  EXPECT_EQ(counts.failure(), 0) << "a preemption spends no other budget";
  EXPECT_EQ(BudgetText(spec->replicas(0), counts, v1::ATTEMPT_PREEMPTED), "preemption budget 1 of 2 left");
  SpendRestart(&counts, v1::ATTEMPT_PREEMPTED);
  EXPECT_EQ(RestartsLeft(spec->replicas(0), counts, v1::ATTEMPT_PREEMPTED), 0);
  EXPECT_THAT(RestartBudgetsRefusal("    restartBudgets: {preemption: some}\n"),
              HasSubstr("replicas.worker.restartBudgets.preemption: 'some' must be a number of restarts"));
}

TEST(RestartBudgetsSpec, APreemptionWouldEndAJobOnceATaskOfACountedRoleSpentItsBudget) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(
      "name: j\nreplicas:\n  ps:\n    command: [x]\n  worker:\n    count: 2\n    command: [x]\n"
      "    restartBudgets: {preemption: 1}\n",
      {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::JobRecord job;
  *job.mutable_spec() = *spec;
  for (const char* role : {"ps", "worker", "worker"}) job.add_tasks()->set_role(role);
  EXPECT_FALSE(PreemptionWouldEnd(job));
  SpendRestart(job.mutable_tasks(0)->mutable_restarts_by_class(), v1::ATTEMPT_PREEMPTED);
  EXPECT_FALSE(PreemptionWouldEnd(job)) << "ps's preemptions are unlimited";
  SpendRestart(job.mutable_tasks(2)->mutable_restarts_by_class(), v1::ATTEMPT_PREEMPTED);
  EXPECT_TRUE(PreemptionWouldEnd(job));
}

TEST(RestartBudgetsSpec, AnUnknownClassIsNamedWithTheKnownOnes) {
  EXPECT_THAT(RestartBudgetsRefusal("    restartBudgets: {oom: 1, gpu: 2}\n"),
              HasSubstr("replicas.worker.restartBudgets.gpu: unknown field (known: gpuError, nodeLost, oom, preemption)"));
}

TEST(RestartBudgetsSpec, ANegativeOrNonNumericBudgetIsRefusedNamingTheField) {
  EXPECT_THAT(RestartBudgetsRefusal("    restartBudgets: {oom: -1}\n"),
              HasSubstr("replicas.worker.restartBudgets.oom: '-1' must be a number of restarts (0 or more) or "
                        "unlimited"));
  EXPECT_THAT(RestartBudgetsRefusal("    restartBudgets: {nodeLost: lots}\n"),
              HasSubstr("replicas.worker.restartBudgets.nodeLost: 'lots' must be a number of restarts"));
  EXPECT_THAT(RestartBudgetsRefusal("    restartBudgets: {oom: [1]}\n"),
              HasSubstr("replicas.worker.restartBudgets.oom: '(not a scalar)' must be a number of restarts"));
}

TEST(RestartBudgetsSpec, ABudgetsValueThatIsNotAMappingIsRefused) {
  EXPECT_THAT(RestartBudgetsRefusal("    restartBudgets: 3\n"), HasSubstr("replicas.worker.restartBudgets: must be a mapping"));
}

TEST(RestartBudgetsSpec, AWireSpecBelowUnlimitedIsRefusedByValidation) {
  absl::StatusOr<v1::JobSpec> spec = RestartBudgetsLoad("");
  ASSERT_TRUE(spec.ok());
  spec->mutable_replicas(0)->mutable_restart_budgets()->set_node_lost(-5);
  std::vector<std::string> problems = ValidateJobSpec(*spec, {});
  EXPECT_THAT(absl::StrJoin(problems, "\n"),
              HasSubstr("replicas.worker.restartBudgets.nodeLost: -5 must be a number of restarts"));
}

TEST(RestartBudgets, DefaultsKeepMaxRestartsForFailuresAndDoNotCountNodeLosses) {
  v1::ReplicaSpec rs;
  rs.set_restart_policy(v1::RESTART_ON_FAILURE);
  rs.set_max_restarts(3);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_FAILED), 3);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_LAUNCH_FAILED), 3);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_OOM_KILLED), 3);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_NODE_LOST), kUnlimitedRestarts);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_PREEMPTED), kUnlimitedRestarts);
  rs.set_restart_policy(v1::RESTART_NEVER);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_FAILED), 0);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_NODE_LOST), 0);
  rs.mutable_restart_budgets()->set_node_lost(2);
  EXPECT_EQ(RestartLimit(rs, v1::ATTEMPT_NODE_LOST), 2) << "an explicit budget holds under Never too";
}

TEST(RestartBudgets, EachClassSpendsItsOwnBudget) {
  v1::ReplicaSpec rs;
  rs.set_restart_policy(v1::RESTART_ON_FAILURE);
  rs.set_max_restarts(2);
  rs.mutable_restart_budgets()->set_oom(1);
  v1::RestartCounts counts;
  SpendRestart(&counts, v1::ATTEMPT_OOM_KILLED);
  SpendRestart(&counts, v1::ATTEMPT_LAUNCH_FAILED);
  SpendRestart(&counts, v1::ATTEMPT_PREEMPTED);  // its own budget, none of these
  EXPECT_EQ(BudgetText(rs, counts, v1::ATTEMPT_OOM_KILLED), "OOM budget 0 of 1 left");
  EXPECT_EQ(BudgetText(rs, counts, v1::ATTEMPT_FAILED), "failure budget 1 of 2 left");
  EXPECT_EQ(BudgetText(rs, counts, v1::ATTEMPT_NODE_LOST), "node-loss budget unlimited");
  EXPECT_EQ(RestartsLeft(rs, counts, v1::ATTEMPT_NODE_LOST), kUnlimitedRestarts);
}

TEST(RestartBudgets, ClassOfExit) {
  v1::TaskExit e;
  e.set_exit_code(0);
  EXPECT_EQ(ClassOfExit(e, false), v1::ATTEMPT_SUCCEEDED);
  e.set_exit_code(1);
  EXPECT_EQ(ClassOfExit(e, false), v1::ATTEMPT_FAILED);
  EXPECT_EQ(ClassOfExit(e, true), v1::ATTEMPT_LAUNCH_FAILED);
  e.set_oom_killed(true);
  EXPECT_EQ(ClassOfExit(e, false), v1::ATTEMPT_OOM_KILLED);
  EXPECT_EQ(AttemptClassName(v1::ATTEMPT_OOM_KILLED), "OOM_KILLED");
}

TEST(RestartBudgets, OnlyTheLastHundredAttemptsAreKept) {
  google::protobuf::RepeatedPtrField<v1::AttemptEnd> attempts;
  for (int i = 0; i < kMaxAttemptEnds + 5; ++i) {
    v1::AttemptEnd a;
    a.set_attempt(i);
    RecordAttemptEnd(&attempts, a);
  }
  ASSERT_EQ(attempts.size(), kMaxAttemptEnds);
  EXPECT_EQ(attempts.Get(0).attempt(), 5);
}

// A big job keeps fewer per task: its record is written whole on each
// change, and a 2,000-task job with 100 ends per task would carry 200,000.
TEST(RestartBudgets, ABigJobKeepsFewerAttemptsPerTask) {
  EXPECT_EQ(AttemptEndsKept(1), kMaxAttemptEnds);
  EXPECT_EQ(AttemptEndsKept(40), kMaxAttemptEnds);
  EXPECT_EQ(AttemptEndsKept(2000), 2);
  EXPECT_EQ(AttemptEndsKept(100000), 1);
  google::protobuf::RepeatedPtrField<v1::AttemptEnd> attempts;
  for (int i = 0; i < 5; ++i) {
    v1::AttemptEnd a;
    a.set_attempt(i);
    RecordAttemptEnd(&attempts, a, AttemptEndsKept(2000));
  }
  ASSERT_EQ(attempts.size(), 2);
  EXPECT_EQ(attempts.Get(0).attempt(), 3);
  EXPECT_EQ(attempts.Get(1).attempt(), 4);
}

}  // namespace
}  // namespace trainyard::api
