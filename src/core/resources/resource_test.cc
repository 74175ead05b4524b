// Tests for Resource arithmetic: add, subtract that never goes negative
// silently, fits-in and the component-wise comparisons.
#include "core/resources/resource.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;

Resource ResourceR(int64_t mem, int64_t vcores, int32_t gpus, uint64_t mask = 0,
           std::string_view ports = "") {
  Resource r;
  r.memory_mb = mem;
  r.vcores_milli = vcores;
  r.gpus = gpus;
  r.gpu_mask = mask;
  r.ports = PortRanges::Parse(ports).value();
  return r;
}

TEST(ResourceTest, ToStringShowsEveryQuantity) {
  EXPECT_EQ(ResourceR(1024, 1500, 2, 0b11, "3000-3001").ToString(),
            "memory=1024MB vcores=1.5 gpus=2 mask=0-1 ports=3000-3001");
  EXPECT_EQ(ResourceR(0, 2000, 0).ToString(), "memory=0MB vcores=2 gpus=0");
  EXPECT_EQ(ResourceR(0, 250, 0).ToString(), "memory=0MB vcores=0.25 gpus=0");
  Resource r;
  r.port_count = 3;
  EXPECT_EQ(r.ToString(), "memory=0MB vcores=0 gpus=0 port_count=3");
}

TEST(ResourceTest, AddUnitesMasksAndPorts) {
  Resource sum = Add(ResourceR(100, 1000, 1, 0b01, "10-11"), ResourceR(50, 500, 1, 0b10, "12"));
  EXPECT_EQ(sum, ResourceR(150, 1500, 2, 0b11, "10-12"));
}

TEST(ResourceTest, SubtractRemovesHeldParts) {
  absl::StatusOr<Resource> d = Subtract(ResourceR(100, 1000, 2, 0b11, "10-12"), ResourceR(40, 500, 1, 0b10, "11"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, ResourceR(60, 500, 1, 0b01, "10,12"));
}

TEST(ResourceTest, SubtractNamesTheQuantityThatWouldGoNegative) {
  EXPECT_THAT(Subtract(ResourceR(10, 0, 0), ResourceR(11, 0, 0)).status().message(),
              HasSubstr("memory_mb: cannot take 11 from 10"));
  EXPECT_THAT(Subtract(ResourceR(10, 100, 0), ResourceR(0, 200, 0)).status().message(),
              HasSubstr("vcores_milli"));
  EXPECT_THAT(Subtract(ResourceR(0, 0, 1), ResourceR(0, 0, 2)).status().message(), HasSubstr("gpus"));
  EXPECT_THAT(Subtract(ResourceR(0, 0, 2, 0b11), ResourceR(0, 0, 1, 0b100)).status().message(),
              HasSubstr("gpu_mask: GPUs 2 are not held"));
  EXPECT_THAT(Subtract(ResourceR(0, 0, 0, 0, "10"), ResourceR(0, 0, 0, 0, "10-11")).status().message(),
              HasSubstr("ports: 11 are not held"));
}

TEST(ResourceTest, FitsInChecksScalarsMaskAndPorts) {
  Resource avail = ResourceR(100, 1000, 2, 0b0110, "10-14");
  EXPECT_TRUE(FitsIn(ResourceR(100, 1000, 2), avail));
  EXPECT_FALSE(FitsIn(ResourceR(101, 0, 0), avail));
  EXPECT_FALSE(FitsIn(ResourceR(0, 0, 3), avail));
  EXPECT_TRUE(FitsIn(ResourceR(0, 0, 1, 0b0100), avail));
  EXPECT_FALSE(FitsIn(ResourceR(0, 0, 1, 0b0001), avail));
  EXPECT_TRUE(FitsIn(ResourceR(0, 0, 0, 0, "11-12"), avail));
  EXPECT_FALSE(FitsIn(ResourceR(0, 0, 0, 0, "14-15"), avail));
  Resource counted = ResourceR(0, 0, 0, 0, "10");
  counted.port_count = 4;
  EXPECT_TRUE(FitsIn(counted, avail));
  counted.port_count = 5;
  EXPECT_FALSE(FitsIn(counted, avail));
}

TEST(ResourceTest, ComparisonsAndNonNegative) {
  EXPECT_TRUE(AllLessOrEqual(ResourceR(1, 1, 1), ResourceR(1, 2, 1)));
  EXPECT_FALSE(AllLessOrEqual(ResourceR(1, 3, 1), ResourceR(1, 2, 1)));
  EXPECT_TRUE(NonNegative(ResourceR(0, 0, 0)));
  EXPECT_FALSE(NonNegative(ResourceR(0, -1, 0)));
  Resource r;
  r.port_count = -1;
  EXPECT_FALSE(NonNegative(r));
}

}  // namespace
}  // namespace trainyard::core
