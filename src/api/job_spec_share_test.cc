// GPU shares, GPU memory and GPU models in a job spec: how they are written,
// what they become on the wire and in the scheduler's request, and the
// refusals, each naming the field.
#include "api/convert.h"
#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

std::string JobSpecShareSpec(const std::string& resources) {
  return "name: j\nreplicas:\n  worker:\n    command: [x]\n    resources: " + resources + "\n";
}

absl::StatusOr<v1::JobSpec> Load(const std::string& resources) {
  return LoadJobSpec(JobSpecShareSpec(resources), core::AllocationLimits{});
}

TEST(JobSpecShareTest, AFractionOfOneGpuIsAShareInThousandths) {
  auto spec = Load("{gpus: 0.25, gpuMemory: 8Gi, gpuModel: [V100M32, A10]}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::Resource& r = spec->replicas(0).resources();
  EXPECT_EQ(r.gpus(), 0);
  EXPECT_EQ(r.gpu_milli(), 250);
  EXPECT_EQ(r.gpu_memory_mb(), 8192);
  EXPECT_THAT(r.gpu_models(), ::testing::ElementsAre("V100M32", "A10"));
  auto milli = Load("{gpuMilli: 125, gpuModel: T4}");
  ASSERT_TRUE(milli.ok()) << milli.status();
  EXPECT_EQ(milli->replicas(0).resources().gpu_milli(), 125);
  EXPECT_THAT(milli->replicas(0).resources().gpu_models(), ::testing::ElementsAre("T4"));
  auto whole = Load("{gpus: 2}");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->replicas(0).resources().gpus(), 2);
  EXPECT_EQ(whole->replicas(0).resources().gpu_milli(), 0);
}

TEST(JobSpecShareTest, TheShareReachesTheSchedulerRequest) {
  auto spec = Load("{gpus: 0.5, gpuMemory: 4Gi, gpuModel: [A10]}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::JobRecord rec;
  rec.set_name("j");
  *rec.mutable_spec() = *spec;
  auto req = ToJobRequest(rec);
  ASSERT_TRUE(req.ok()) << req.status();
  const core::RoleRequest& role = req->roles[0];
  EXPECT_TRUE(role.resource.IsGpuShare());
  EXPECT_EQ(role.resource.gpu_milli, 500);
  EXPECT_EQ(role.resource.gpu_memory_mb, 4096);
  EXPECT_THAT(role.gpu_models, ::testing::ElementsAre("A10"));
  // An allocation of a share survives the wire both ways (recovery reads it
  // back from the store's task record).
  core::Resource held{.memory_mb = 1, .gpu_mask = 0b1000, .gpu_milli = 500, .gpu_memory_mb = 4096};
  EXPECT_EQ(ToCore(ToProto(held)), held);
}

// A node reports the name NVML gives ("Tesla V100-SXM2-32GB"); a spec may
// say V100M32 or the long name: both reach the scheduler in the short form.
TEST(JobSpecShareTest, GpuModelsReachTheSchedulerInTheirShortForm) {
  auto spec = Load("{gpus: 1, gpuModel: [\"Tesla V100-SXM2-32GB\", A10]}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::JobRecord rec;
  rec.set_name("j");
  *rec.mutable_spec() = *spec;
  auto req = ToJobRequest(rec);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_THAT(req->roles[0].gpu_models, ::testing::ElementsAre("V100M32", "A10"));
  v1::NodeInfo info;
  info.set_name("n1");
  info.set_gpu_model("Tesla V100-SXM2-32GB");
  auto node = ToNodeSpec(info);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->gpu_model, "V100M32");
}

TEST(JobSpecShareTest, RefusalsNameTheField) {
  auto refusal = [](const std::string& resources) {
    auto spec = Load(resources);
    return spec.ok() ? std::string() : std::string(spec.status().message());
  };
  const std::string at = "replicas.worker.resources.";
  EXPECT_THAT(refusal("{gpus: 1.5}"), HasSubstr(at + "gpus: must be a whole number of GPUs, or a share"));
  EXPECT_THAT(refusal("{gpus: 0.0001}"), HasSubstr(at + "gpus: must be a whole number"));
  EXPECT_THAT(refusal("{gpus: 1, gpuMilli: 500}"), HasSubstr(at + "gpuMilli: give gpus or gpuMilli, not both"));
  EXPECT_THAT(refusal("{gpuMilli: 1000}"), HasSubstr(at + "gpuMilli: 1000 must be 1..999"));
  EXPECT_THAT(refusal("{gpuMilli: -5}"), HasSubstr(at + "gpuMilli: -5 must be 1..999"));
  EXPECT_THAT(refusal("{gpus: 2, gpuMemory: 8Gi}"), HasSubstr(at + "gpuMemory: goes only with a share"));
  EXPECT_THAT(refusal("{gpus: 0.5, gpuMemory: lots}"), HasSubstr(at + "gpuMemory: "));
  EXPECT_THAT(refusal("{gpus: 0.5, gpuMask: [1]}"), HasSubstr(at + "gpuMask: a share of one GPU cannot name GPUs"));
  EXPECT_THAT(refusal("{gpuModel: {a: b}}"), HasSubstr(at + "gpuModel: must be a GPU model or a list"));
  EXPECT_THAT(refusal("{gpuModel: [\"\"]}"), HasSubstr(at + "gpuModel[0]: must not be empty"));
}

}  // namespace
}  // namespace trainyard::api
