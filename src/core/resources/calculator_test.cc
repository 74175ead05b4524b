// Tests for the resource calculators: share of the cluster, fits, compare,
// and the factory's error for an unknown name.
#include "core/resources/calculator.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::DoubleEq;
using ::testing::HasSubstr;

Resource R(int64_t mem, int64_t vcores, int32_t gpus) {
  Resource r;
  r.memory_mb = mem;
  r.vcores_milli = vcores;
  r.gpus = gpus;
  return r;
}

ResourceCalculatorPtr Make(std::string_view name) { return MakeResourceCalculator(name).value(); }

const Resource kCluster = R(1000, 100000, 16);

TEST(CalculatorTest, MemoryMeasuresMemoryOnly) {
  ResourceCalculatorPtr c = Make("memory");
  EXPECT_EQ(c->Name(), "memory");
  EXPECT_THAT(c->Share(R(250, 100000, 16), kCluster), DoubleEq(0.25));
  EXPECT_TRUE(c->Fits(R(10, 999999, 99), R(10, 0, 0)));
  EXPECT_FALSE(c->Fits(R(11, 0, 0), R(10, 0, 0)));
  EXPECT_LT(c->Compare(R(1, 9, 9), R(2, 0, 0), kCluster), 0);
  EXPECT_EQ(c->Compare(R(2, 9, 9), R(2, 0, 0), kCluster), 0);
  EXPECT_THAT(c->Share(R(5, 0, 0), R(0, 0, 0)), DoubleEq(0.0));
}

TEST(CalculatorTest, GpuMeasuresGpusOnly) {
  ResourceCalculatorPtr c = Make("gpu");
  EXPECT_THAT(c->Share(R(1000, 0, 4), kCluster), DoubleEq(0.25));
  EXPECT_TRUE(c->Fits(R(99999, 0, 2), R(0, 0, 2)));
  EXPECT_FALSE(c->Fits(R(0, 0, 3), R(0, 0, 2)));
  EXPECT_GT(c->Compare(R(0, 0, 3), R(999, 0, 2), kCluster), 0);
}

TEST(CalculatorTest, DominantTakesTheLargestShare) {
  ResourceCalculatorPtr c = Make("dominant");
  // memory 10%, vcores 20%, GPUs 50%: the GPU share dominates.
  EXPECT_THAT(c->Share(R(100, 20000, 8), kCluster), DoubleEq(0.5));
  EXPECT_TRUE(c->Fits(R(10, 10, 1), R(10, 10, 1)));
  EXPECT_FALSE(c->Fits(R(10, 11, 1), R(10, 10, 1)));
  // Same dominant share (50%): the second largest decides.
  EXPECT_LT(c->Compare(R(100, 0, 8), R(200, 0, 8), kCluster), 0);
  EXPECT_GT(c->Compare(R(500, 0, 0), R(0, 0, 4), kCluster), 0);
  EXPECT_EQ(c->Compare(R(500, 0, 0), R(0, 50000, 0), kCluster), 0);
  // A cluster without GPUs leaves GPUs out of the share.
  EXPECT_THAT(c->Share(R(100, 0, 1), R(1000, 0, 0)), DoubleEq(0.1));
}

TEST(CalculatorTest, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<ResourceCalculatorPtr> c = MakeResourceCalculator("drf");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("resource calculator: unknown 'drf'; known: memory, dominant, gpu"));
}

}  // namespace
}  // namespace trainyard::core
