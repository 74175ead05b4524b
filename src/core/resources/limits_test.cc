// Tests for ValidateRequest: every limit, and errors that name the resource,
// the value and the limit.
#include "core/resources/limits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

std::string Check(const Resource& r, const AllocationLimits& limits = {}) {
  absl::Status s = ValidateRequest(r, limits);
  return s.ok() ? "OK" : std::string(s.message());
}

Resource R(int64_t mem, int64_t vcores, int32_t gpus) {
  Resource r;
  r.memory_mb = mem;
  r.vcores_milli = vcores;
  r.gpus = gpus;
  return r;
}

TEST(LimitsTest, WithinLimitsIsOk) {
  EXPECT_EQ(Check(R(1024, 1000, 8)), "OK");
  EXPECT_EQ(Check(R(0, 0, 0)), "OK");
}

TEST(LimitsTest, ErrorsNameResourceValueAndLimit) {
  EXPECT_EQ(Check(R(0, 0, 9)), "gpus: 9 is above the maximum allocation 8");
  EXPECT_EQ(Check(R(2 << 20, 0, 0)), "memory_mb: 2097152 is above the maximum allocation 1048576");
  EXPECT_EQ(Check(R(0, 300000, 0)), "vcores_milli: 300000 is above the maximum allocation 256000");
  AllocationLimits mins;
  mins.min_memory_mb = 512;
  mins.min_vcores_milli = 100;
  mins.min_gpus = 1;
  EXPECT_EQ(Check(R(256, 100, 1), mins), "memory_mb: 256 is below the minimum allocation 512");
  EXPECT_EQ(Check(R(512, 50, 1), mins), "vcores_milli: 50 is below the minimum allocation 100");
  EXPECT_EQ(Check(R(512, 100, 0), mins), "gpus: 0 is below the minimum allocation 1");
  EXPECT_EQ(Check(R(-1, 0, 0)), "memory_mb: -1 is negative");
  EXPECT_EQ(Check(R(0, 0, -2)), "gpus: -2 is negative");
}

TEST(LimitsTest, MaskMustMatchCount) {
  Resource r = R(0, 0, 2);
  r.gpu_mask = 0b111;
  EXPECT_EQ(Check(r), "gpus: 2 does not match gpu_mask 0-2 (3 GPUs)");
  r.gpus = 3;
  EXPECT_EQ(Check(r), "OK");
}

TEST(LimitsTest, PortsCountExplicitAndAny) {
  Resource r;
  r.ports = PortRanges::Parse("1000-1059").value();
  r.port_count = 4;
  EXPECT_EQ(Check(r), "OK");
  r.port_count = 5;
  EXPECT_EQ(Check(r), "ports: 65 is above the maximum allocation 64");
  r.port_count = -1;
  EXPECT_EQ(Check(r), "port_count: -1 is negative");
}

}  // namespace
}  // namespace trainyard::core
