#include "api/exec_size.h"

#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::JobSpec Spec(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(yaml, UnboundedLimits());
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

const ExecJob kJob{.name = "j", .checkpoint_dir = "/data/checkpoints/j", .job_master = true};

TEST(ExecSizeTest, AnOrdinaryRoleFits) {
  v1::JobSpec spec = Spec("name: j\nreplicas:\n  worker: {count: 4, command: [sh, -c, 'exit 0'], env: {A: b}}\n");
  EXPECT_THAT(CheckExecSize(spec, kJob, {.arg_max = 2 << 20}), IsEmpty());
}

TEST(ExecSizeTest, NotCheckedWithoutALimit) {
  v1::JobSpec spec = Spec("name: j\nreplicas:\n  worker: {command: [x]}\n");
  spec.mutable_replicas(0)->mutable_env()->insert({"BIG", std::string(1 << 20, 'x')});
  EXPECT_THAT(CheckExecSize(spec, kJob, {.arg_max = 0}), IsEmpty());
}

TEST(ExecSizeTest, OneVariableAboveWhatTheKernelTakesInOneString) {
  v1::JobSpec spec = Spec("name: j\nreplicas:\n  worker: {command: [x]}\n");
  spec.mutable_replicas(0)->mutable_env()->insert({"BIG", std::string(200000, 'x')});
  EXPECT_THAT(CheckExecSize(spec, kJob, {.arg_max = 2 << 20}),
              ElementsAre("replicas.worker.env.BIG: 200004 bytes is above the 131072 bytes the kernel takes in "
                          "one variable"));
}

TEST(ExecSizeTest, OneArgumentAboveWhatTheKernelTakesInOneString) {
  v1::JobSpec spec = Spec("name: j\nreplicas:\n  worker: {command: [x]}\n");
  spec.mutable_replicas(0)->add_args(std::string(140000, 'a'));
  EXPECT_THAT(CheckExecSize(spec, kJob, {.arg_max = 2 << 20}),
              ElementsAre("replicas.worker.args[0]: 140000 bytes is above the 131072 bytes the kernel takes in "
                          "one argument"));
}

TEST(ExecSizeTest, AllTogetherAboveArgMaxCountsTrainyardsVariables) {
  v1::JobSpec spec = Spec("name: j\nreplicas:\n  worker: {command: [x]}\n");
  for (int i = 0; i < 11; ++i) spec.mutable_replicas(0)->add_args(std::string(100000, 'a'));
  std::vector<std::string> problems = CheckExecSize(spec, kJob, {.arg_max = 1 << 20});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("replicas.worker: command, args and environment come to "));
  EXPECT_THAT(problems[0], HasSubstr("of variables Trainyard sets and 32768 kept for the node's own), above the "
                                     "1048576 bytes the kernel will start a program with (ARG_MAX)"));
}

TEST(ExecSizeTest, TfConfigOfAHugeJobIsNamed) {
  v1::JobSpec spec = Spec("name: j\nframework: tensorflow\nreplicas:\n  worker: {count: 10000, command: [x]}\n");
  std::vector<std::string> problems = CheckExecSize(spec, kJob, {.arg_max = 2 << 20});
  ASSERT_FALSE(problems.empty());
  EXPECT_THAT(problems[0], HasSubstr("replicas.worker: the variable TF_CONFIG that Trainyard sets would be "));
}

}  // namespace
}  // namespace trainyard::api
