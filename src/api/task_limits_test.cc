// EnforcedLimitsText: what describe and the REST view print for a task's limits.
#include "api/task_limits.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(EnforcedLimitsTextTest, NamesWhatEnforcesEachLimit) {
  v1::EnforcedLimits l;
  l.set_memory_mb(512);
  l.set_memory_by("cgroup v1");
  l.set_vcores_milli(500);
  l.set_cpu_by("cgroup v1 quota");
  l.set_pids_max(4096);
  l.set_pids_by("cgroup v1");
  EXPECT_EQ(EnforcedLimitsText(l), "memory 512Mi (cgroup v1), cpu 500m (cgroup v1 quota), pids 4096 (cgroup v1)");
}

TEST(EnforcedLimitsTextTest, SaysWhichAreNotEnforcedAndWhy) {
  v1::EnforcedLimits l;
  l.set_memory_mb(1024);
  l.set_vcores_milli(2000);
  l.set_cpu_by("cgroup v2 quota");
  l.set_why_not("the memory controller is not delegated to /user.slice");
  EXPECT_EQ(EnforcedLimitsText(l),
            "memory 1Gi: not enforced, cpu 2 (cgroup v2 quota), pids: no limit (the memory controller is not "
            "delegated to /user.slice)");
}

}  // namespace
}  // namespace trainyard::api
