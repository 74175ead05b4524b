#include "api/job_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

constexpr char kGoodSpec[] = R"(
name: mnist
user: alice
queue: research
priority: production
framework: tensorflow
relaxLocality: true
nodeSelector: {gpu_model: V100M32}
replicas:
  ps:
    count: 2
    resources: {cpu: 500m, memory: 1Gi, ports: 1}
    command: [sh, -c, "sleep 100"]
  worker:
    count: 4
    restartPolicy: OnFailure
    maxRestarts: 3
    resources: {cpu: 2, memory: 4096, gpus: 2}
    command: ["./train"]
    args: ["--epochs", "3"]
    env: {LR: "0.1"}
)";

TEST(JobSpecTest, ParsesEveryField) {
  auto spec = LoadJobSpec(kGoodSpec, core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "mnist");
  EXPECT_EQ(spec->user(), "alice");
  EXPECT_EQ(spec->queue(), "research");
  EXPECT_EQ(spec->priority(), v1::PRIORITY_PRODUCTION);
  EXPECT_EQ(spec->framework(), v1::FRAMEWORK_TENSORFLOW);
  EXPECT_TRUE(spec->relax_locality());
  EXPECT_EQ(spec->node_selector().at("gpu_model"), "V100M32");
  ASSERT_EQ(spec->replicas_size(), 2);
  const auto& ps = spec->replicas(0);
  EXPECT_EQ(ps.role(), "ps");
  EXPECT_EQ(ps.count(), 2);
  EXPECT_EQ(ps.resources().vcores_milli(), 500);
  EXPECT_EQ(ps.resources().memory_mb(), 1024);
  EXPECT_EQ(ps.resources().port_count(), 1);
  const auto& worker = spec->replicas(1);
  EXPECT_EQ(worker.restart_policy(), v1::RESTART_ON_FAILURE);
  EXPECT_EQ(worker.max_restarts(), 3);
  EXPECT_EQ(worker.resources().gpus(), 2);
  EXPECT_EQ(worker.resources().vcores_milli(), 2000);
  EXPECT_EQ(worker.args_size(), 2);
  EXPECT_EQ(worker.env().at("LR"), "0.1");
}

TEST(JobSpecTest, QuantitiesAcceptKubernetesForms) {
  EXPECT_EQ(*ParseCpuQuantity("1.5"), 1500);
  EXPECT_EQ(*ParseCpuQuantity("250m"), 250);
  EXPECT_EQ(*ParseMemoryQuantity("512Mi"), 512);
  EXPECT_EQ(*ParseMemoryQuantity("4Gi"), 4096);
  EXPECT_EQ(*ParseMemoryQuantity("2048"), 2048);
  EXPECT_EQ(*ParseMemoryQuantity("1G"), 954);  // 10^9 bytes, rounded up to MiB
  EXPECT_THAT(ParseCpuQuantity("lots").status().message(), HasSubstr("'lots' is not a CPU quantity"));
  EXPECT_THAT(ParseMemoryQuantity("4Gb").status().message(), HasSubstr("'4Gb' is not a memory quantity"));
}

TEST(JobSpecTest, ReportsEveryProblemWithItsFieldPath) {
  auto spec = LoadJobSpec(R"(
name: Bad_Name
colour: blue
priority: urgent
replicas:
  worker:
    count: 0
    resources: {gpus: 9, cpu: fast, disk: 10}
    command: [x]
    restartPolicy: Sometimes
)", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  std::string m(spec.status().message());
  EXPECT_THAT(m, HasSubstr("colour: unknown field"));
  EXPECT_THAT(m, HasSubstr("priority: 'urgent' is not one of production, iteration, ptr"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.resources.disk: unknown field"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.resources.cpu: 'fast' is not a CPU quantity"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.restartPolicy: 'Sometimes' is not one of Never, OnFailure, Always"));
}

TEST(JobSpecTest, ValidationNamesResourceValueAndLimit) {
  auto spec = LoadJobSpec(R"(
name: big
replicas:
  worker:
    count: 0
    resources: {gpus: 9}
    command: [x]
)", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  std::string m(spec.status().message());
  EXPECT_THAT(m, HasSubstr("replicas.worker.count: 0 must be between 1 and 10000"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.resources.gpus: 9 is above the maximum allocation 8"));
}

TEST(JobSpecTest, MaskAndCountMustAgree) {
  auto spec = LoadJobSpec(R"(
name: masked
replicas:
  worker:
    resources: {gpus: 3, gpuMask: [0, 1]}
    command: [x]
)", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("replicas.worker.resources.gpu"));
  auto ok = LoadJobSpec(R"(
name: masked
replicas:
  worker:
    resources: {gpuMask: "0-1"}
    command: [x]
)", core::AllocationLimits{});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->replicas(0).resources().gpus(), 2);
  EXPECT_EQ(ok->replicas(0).resources().gpu_mask(), 0x3u);
}

TEST(JobSpecTest, FrameworkNeedsItsRoles) {
  auto tf = LoadJobSpec("name: t\nframework: tensorflow\nreplicas:\n  ps: {command: [x]}\n",
                        core::AllocationLimits{});
  ASSERT_FALSE(tf.ok());
  EXPECT_THAT(tf.status().message(), HasSubstr("tensorflow needs a 'worker' or 'chief' role"));
  auto pt = LoadJobSpec("name: p\nframework: pytorch\nreplicas:\n  master: {count: 2, command: [x]}\n",
                        core::AllocationLimits{});
  ASSERT_FALSE(pt.ok());
  EXPECT_THAT(pt.status().message(), HasSubstr("pytorch needs exactly one master rank, got 2"));
}

TEST(JobSpecTest, MalformedYamlNamesTheLine) {
  auto spec = LoadJobSpec("name: x\nreplicas: [\n", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("not valid YAML: line"));
}

}  // namespace
}  // namespace trainyard::api
