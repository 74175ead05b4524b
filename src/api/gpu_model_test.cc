// GPU model short names from the names NVML and nvidia-smi report.
#include "api/gpu_model.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(GpuModelTest, LongNamesBecomeTheShortNamesSpecsUse) {
  EXPECT_EQ(CanonicalGpuModel("Tesla V100-SXM2-32GB"), "V100M32");
  EXPECT_EQ(CanonicalGpuModel("Tesla V100-PCIE-16GB"), "V100M16");
  EXPECT_EQ(CanonicalGpuModel("Tesla P100-PCIE-16GB"), "P100M16");
  EXPECT_EQ(CanonicalGpuModel("Tesla T4"), "T4");
  EXPECT_EQ(CanonicalGpuModel("NVIDIA A10"), "A10");
  EXPECT_EQ(CanonicalGpuModel("NVIDIA A100-SXM4-80GB"), "A100M80");
  EXPECT_EQ(CanonicalGpuModel("NVIDIA H100 80GB HBM3"), "H100M80");
  EXPECT_EQ(CanonicalGpuModel("NVIDIA GeForce RTX 3090"), "RTX3090");
}

TEST(GpuModelTest, AShortNameIsItsOwn) {
  for (const char* name : {"V100M32", "V100M16", "A10", "T4", "G2", "P100", "H100M80"}) {
    EXPECT_EQ(CanonicalGpuModel(name), name);
  }
  EXPECT_EQ(CanonicalGpuModel("v100m32"), "V100M32") << "case does not matter";
  EXPECT_EQ(CanonicalGpuModel(""), "");
  EXPECT_EQ(CanonicalGpuModel("NVIDIA"), "NVIDIA") << "nothing but a vendor word stays as given";
}

}  // namespace
}  // namespace trainyard::api
