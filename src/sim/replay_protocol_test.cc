// The time replay on a hand-made pod list whose delays are worked out by
// hand: every policy, the core's path among them, reports the same waits.
#include "sim/replay_protocol.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::sim {
namespace {

using ::testing::HasSubstr;

NodeList OneGpu() {
  NodeList list;
  list.source = "nodes.csv";
  list.nodes.push_back(NodeSpec{.name = "n0", .cpu_milli = 64000, .memory_mib = 262144, .gpus = 1,
                                .gpu_model = "A10", .line = 2});
  return list;
}

// A pod of `milli` thousandths of one GPU (1000: the whole GPU) arriving at
// `at` and running `runs` seconds once placed.
JobSpec ReplayProtocolPod(const std::string& name, int milli, int64_t at, int64_t runs, std::vector<std::string> models = {}) {
  JobSpec job;
  job.name = name;
  job.submit_s = at;
  job.duration_s = runs;
  RoleSpec role;
  role.cpu_milli = 1000;
  role.memory_mib = 1024;
  role.gpus = 1;
  role.gpu_milli = milli;
  job.roles.push_back(role);
  job.gpu_models = std::move(models);
  return job;
}

// a holds the GPU 0-100; b (0.5) and c (0.5) wait for it and run from 100
// (b to 150, c to 130); d (whole) waits until b leaves at 150.
Trace FourPods() {
  Trace t;
  t.source = "pods.csv";
  t.jobs = {ReplayProtocolPod("a", 1000, 0, 100), ReplayProtocolPod("b", 500, 10, 50), ReplayProtocolPod("c", 500, 20, 30), ReplayProtocolPod("d", 1000, 30, 10)};
  return t;
}

const std::vector<std::string> kPolicies = {"best-fit", "fgd", "fgd-int", "core:fragmentation", "core:topology"};

TEST(ReplayProtocolTest, EveryPolicyReportsTheWaitsWorkedOutByHand) {
  auto report = RunReplayProtocol(OneGpu(), FourPods(), {.policies = kPolicies, .samples = 2});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->policies.size(), kPolicies.size());
  for (const ReplayPolicyResult& r : report->policies) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.placed, 4);
    EXPECT_EQ(r.never_placed, 0);
    EXPECT_EQ(r.delayed, 3);
    EXPECT_DOUBLE_EQ(r.mean_delay_s, (0 + 90 + 80 + 120) / 4.0);
    EXPECT_DOUBLE_EQ(r.p95_delay_s, 120);
    EXPECT_DOUBLE_EQ(r.max_delay_s, 120);
    EXPECT_DOUBLE_EQ(r.mean_alloc_pct, 100) << "a holds the whole GPU while the pods arrive";
    EXPECT_THAT(r.alloc_pct, ::testing::ElementsAre(100, 100));
  }
  EXPECT_EQ(report->sample_times_s, (std::vector<int64_t>{0, 30}));
}

// e (0.5, arriving at 40, runs 10) fits the half GPU c leaves at 130 while
// d (whole, at 30) still waits for b: every policy places e at 130 ahead of
// d (wait 90), and d still starts at 150 (wait 120) as e left at 140.
TEST(ReplayProtocolTest, AShareThatFitsPassesAWholeGpuThatWaits) {
  Trace t = FourPods();
  t.jobs.push_back(ReplayProtocolPod("e", 500, 40, 10));
  auto report = RunReplayProtocol(OneGpu(), t, {.policies = kPolicies, .samples = 2});
  ASSERT_TRUE(report.ok()) << report.status();
  for (const ReplayPolicyResult& r : report->policies) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.placed, 5);
    EXPECT_EQ(r.delayed, 4);
    EXPECT_DOUBLE_EQ(r.mean_delay_s, (0 + 90 + 80 + 120 + 90) / 5.0);
    EXPECT_DOUBLE_EQ(r.max_delay_s, 120);
  }
}

TEST(ReplayProtocolTest, AFasterArrivalRateWaitsLonger) {
  auto report = RunReplayProtocol(OneGpu(), FourPods(), {.policies = {"core:fragmentation"}, .arrival_scale = 2});
  ASSERT_TRUE(report.ok()) << report.status();
  // Arrivals at 0, 5, 10, 15: b and c wait until 100, d until 150.
  EXPECT_DOUBLE_EQ(report->policies[0].mean_delay_s, (0 + 95 + 90 + 135) / 4.0);
  EXPECT_DOUBLE_EQ(report->policies[0].p95_delay_s, 135);
}

TEST(ReplayProtocolTest, APodNoNodeCanHoldIsNeverPlacedAndOthersPassIt) {
  Trace t = FourPods();
  t.jobs.insert(t.jobs.begin() + 1, ReplayProtocolPod("v100", 500, 5, 10, {"V100"}));
  auto report = RunReplayProtocol(OneGpu(), t, {.policies = {"best-fit", "core:fragmentation"}});
  ASSERT_TRUE(report.ok()) << report.status();
  for (const ReplayPolicyResult& r : report->policies) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.placed, 4);
    EXPECT_EQ(r.never_placed, 1);
    EXPECT_DOUBLE_EQ(r.mean_delay_s, (0 + 90 + 80 + 120) / 4.0);
  }
  std::string table = FormatReplayReport(*report);
  EXPECT_THAT(table, HasSubstr("queueing delay mean (s)"));
  EXPECT_THAT(table, HasSubstr("pods never placed"));
}

TEST(ReplayProtocolTest, BadOptionsAreRefused) {
  EXPECT_FALSE(RunReplayProtocol(OneGpu(), FourPods(), {}).ok()) << "no policies";
  EXPECT_FALSE(RunReplayProtocol(OneGpu(), FourPods(), {.policies = {"nope"}}).ok());
  EXPECT_FALSE(RunReplayProtocol(OneGpu(), FourPods(), {.policies = {"fgd"}, .arrival_scale = 0}).ok());
}

}  // namespace
}  // namespace trainyard::sim
