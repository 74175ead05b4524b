#include "api/exec_size.h"

#include "absl/strings/str_cat.h"
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

// The largest job CheckExecSize checks by its own strings alone, in two
// shapes (one role of every task, a role per task), for every framework:
// what Trainyard adds stays under the bound that skips the estimate.
TEST(ExecSizeTest, WhatTrainyardAddsToASmallJobStaysUnderItsBound) {
  const ExecJob job{.name = std::string(kSmallJob.name_bytes, 'j'),
                    .checkpoint_dir = std::string(kSmallJob.path_bytes, 'c'), .job_master = true};
  for (v1::Framework fw : {v1::FRAMEWORK_NONE, v1::FRAMEWORK_TENSORFLOW, v1::FRAMEWORK_PYTORCH, v1::FRAMEWORK_MPI}) {
    for (int roles : {1, kSmallJob.tasks}) {
      v1::JobSpec spec;
      spec.set_framework(fw);
      for (int r = 0; r < roles; ++r) {
        v1::ReplicaSpec* rs = spec.add_replicas();
        rs->set_role(absl::StrCat(std::string(kSmallJob.name_bytes - 3, 'r'), 100 + r));
        rs->set_count(kSmallJob.tasks / roles);
        rs->mutable_resources()->set_gpus(64);
        rs->mutable_resources()->set_port_count(static_cast<int>(kSmallJob.ports));
        rs->mutable_command()->Add()->assign(1, 'x');
      }
      int64_t bytes = TrainyardEnvBytes(spec, job);
      EXPECT_GT(bytes, 0);
      EXPECT_LT(bytes, kSmallJob.env_bytes) << v1::Framework_Name(fw) << ", " << roles << " roles";
    }
  }
}

TEST(ExecSizeTest, ASmallJobWhoseOwnStringsAreTooLongIsStillRefused) {
  v1::JobSpec spec = Spec("name: j\nreplicas:\n  worker: {command: [x]}\n");
  spec.mutable_replicas(0)->mutable_env()->insert({"A", std::string(400 << 10, 'x')});
  spec.mutable_replicas(0)->add_args(std::string(100 << 10, 'a'));
  // Under a 512 KiB ARG_MAX the spec's strings alone fit, but not with what
  // Trainyard adds and the node's reserve: the full estimate decides.
  std::vector<std::string> problems = CheckExecSize(spec, kJob, {.arg_max = 512 << 10, .max_string = 1 << 20});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("above the 524288 bytes the kernel will start a program with (ARG_MAX)"));
}

}  // namespace
}  // namespace trainyard::api
