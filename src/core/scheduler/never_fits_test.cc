// Jobs that can never fit the cluster's nodes, even empty, are told so
// ("unschedulable: ...", naming the largest node) instead of a reason that
// reads as if waiting would help; the reason changes once a node that could
// hold them joins.
#include "core/policy/pending_reason.h"
#include "core/scheduler/scheduler.h"
#include "core/scheduler/scheduler_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::StartsWith;
using testing::EightGpuNode;
using testing::MakeJob;
using testing::PlacementOf;
using testing::ReasonOf;
using testing::T;

// 8 GPUs, 64 GiB, 32 vcores, as a node of `trainyard up` has.
NodeSpec SmallNode(int i) {
  NodeSpec n = EightGpuNode(i);
  n.capacity.memory_mb = 65536;
  n.capacity.vcores_milli = 32000;
  return n;
}

std::unique_ptr<Scheduler> TwoSmallNodes() {
  SchedulerOptions opt;
  opt.limits.max_memory_mb = 1 << 20;
  auto s = Scheduler::Create(opt).value();
  EXPECT_TRUE(s->AddNode(SmallNode(0)).ok());
  EXPECT_TRUE(s->AddNode(SmallNode(1)).ok());
  return s;
}

TEST(NeverFitsTest, AGangLargerThanTheWholeClusterIsUnschedulableUntilANodeJoins) {
  auto s = TwoSmallNodes();
  ASSERT_TRUE(s->AddJob(MakeJob("big", {.tasks = 3, .gpus = 8})).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(ReasonOf(d, "big"),
            "unschedulable: gang needs 3 worker tasks of 8 GPUs, 1024 MB memory, 1.0 vcores at once; the 2 "
            "matching nodes could hold only 2 even when empty (the largest is node-0: 8 GPUs, 65536 MB memory, "
            "32.0 vcores)");
  EXPECT_TRUE(d.preemptions.empty());
  ASSERT_TRUE(s->AddNode(SmallNode(2)).ok());
  EXPECT_NE(PlacementOf(s->Schedule(T(2)), "big"), nullptr) << "flips back once the cluster can hold it";
}

TEST(NeverFitsTest, AGpuIndexNoNodeHasIsUnschedulable) {
  auto s = TwoSmallNodes();
  JobRequest job = MakeJob("masked", {.gpus = 1});
  job.roles[0].resource.gpu_mask = 1ull << 9;
  ASSERT_TRUE(s->AddJob(job).ok());
  EXPECT_EQ(ReasonOf(s->Schedule(T(1)), "masked"),
            "unschedulable: needs GPUs 9 on one node; no matching node has GPU 9; the largest matching node is "
            "node-0: 8 GPUs, 65536 MB memory, 32.0 vcores");
}

TEST(NeverFitsTest, MoreMemoryThanAnyNodeHasIsUnschedulable) {
  auto s = TwoSmallNodes();
  ASSERT_TRUE(s->AddJob(MakeJob("fat", {.gpus = 1, .memory_mb = 100 * 1024})).ok());
  EXPECT_EQ(ReasonOf(s->Schedule(T(1)), "fat"),
            "unschedulable: needs 102400 MB memory on one node; the largest matching node is node-0: 8 GPUs, "
            "65536 MB memory, 32.0 vcores");
}

TEST(NeverFitsTest, AJobThatFitsOnceWorkEndsIsNotUnschedulable) {
  auto s = TwoSmallNodes();
  ASSERT_TRUE(s->AddJob(MakeJob("first", {.tasks = 2, .gpus = 8})).ok());
  ASSERT_NE(PlacementOf(s->Schedule(T(1)), "first"), nullptr);
  ASSERT_TRUE(s->AddJob(MakeJob("second", {.tasks = 2, .gpus = 8, .submit = 2})).ok());
  std::string reason = ReasonOf(s->Schedule(T(3)), "second");
  EXPECT_EQ(reason, "needs 8 GPUs on one node; the most free on one node is 0 (node-0)");
  EXPECT_THAT(reason, ::testing::Not(StartsWith(kUnschedulablePrefix)));
}

TEST(NeverFitsTest, AClusterWithNoNodesYetSaysSoWithoutCallingTheJobUnschedulable) {
  auto s = Scheduler::Create({}).value();
  ASSERT_TRUE(s->AddJob(MakeJob("early", {.gpus = 1})).ok());
  EXPECT_THAT(ReasonOf(s->Schedule(T(1)), "early"), StartsWith("no schedulable node in the cluster"));
}

TEST(NeverFitsTest, ANodeThatIsDownStillCountsAsOneThatCouldHoldTheJob) {
  auto s = TwoSmallNodes();
  ASSERT_TRUE(s->SetSchedulable("node-1", false).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("pair", {.tasks = 2, .gpus = 8})).ok());
  EXPECT_THAT(ReasonOf(s->Schedule(T(1)), "pair"), ::testing::Not(StartsWith(kUnschedulablePrefix)));
}

}  // namespace
}  // namespace trainyard::core
