// Scheduler: ports — ports in use on a node are never given, ports a task
// left cool before a count request gets them again, exact ports are checked
// on every node of a gang, and pending reasons name the ports.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/scheduler/scheduler.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;
using testing::EightGpuNode;
using testing::JobArgs;
using testing::MakeJob;
using testing::PlacementOf;
using testing::ReasonOf;
using testing::T;

std::unique_ptr<Scheduler> SchedulerPortsMakeScheduler(int nodes, SchedulerOptions opt = {}) {
  auto s = Scheduler::Create(opt).value();
  for (int i = 0; i < nodes; ++i) EXPECT_TRUE(s->AddNode(EightGpuNode(i)).ok());
  return s;
}

PortRanges Ports(const char* text) { return PortRanges::Parse(text).value(); }

JobRequest CountJob(const std::string& id, int ports, int submit = 0) {
  JobRequest job = MakeJob(id, {.gpus = 0, .submit = submit});
  job.roles[0].resource.port_count = ports;
  return job;
}

JobRequest FixedJob(const std::string& id, const char* ports, int tasks = 1) {
  JobRequest job = MakeJob(id, {.tasks = tasks, .gpus = 0});
  job.roles[0].resource.ports = Ports(ports);
  return job;
}

std::string PortsOf(const Decisions& d, const std::string& id, int task = 0) {
  const JobPlacement* p = PlacementOf(d, id);
  return p == nullptr ? "(not placed)" : p->tasks[task].allocation.ports.ToString();
}

TEST(SchedulerPortsTest, PortsInUseOnTheNodeAreNotGiven) {
  auto s = SchedulerPortsMakeScheduler(1);
  // 29999 lies outside the node's range: ignored.
  ASSERT_TRUE(s->SetPortsInUse("node-0", Ports("29999-30000,30002")).ok());
  EXPECT_EQ(s->state().ports(0).in_use.ToString(), "30000,30002");
  ASSERT_TRUE(s->AddJob(CountJob("j", 2)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(1)), "j"), "30001,30003");
  EXPECT_FALSE(s->SetPortsInUse("node-9", Ports("30000")).ok());
}

TEST(SchedulerPortsTest, ExactPortInUseIsNotGivenAndTheReasonNamesIt) {
  auto s = SchedulerPortsMakeScheduler(1);
  ASSERT_TRUE(s->SetPortsInUse("node-0", Ports("30005")).ok());
  ASSERT_TRUE(s->AddJob(FixedJob("j", "30005")).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(PlacementOf(d, "j"), nullptr);
  EXPECT_EQ(ReasonOf(d, "j"),
            "needs port 30005 free on one node; no matching node has it (node-0: 30005 in use on the node)");
  // The agent reports it closed: the job starts.
  ASSERT_TRUE(s->SetPortsInUse("node-0", Ports("")).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(2)), "j"), "30005");
}

TEST(SchedulerPortsTest, ExactPortHeldByATaskIsNamedInTheReason) {
  auto s = SchedulerPortsMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(FixedJob("a", "30005-30006")).ok());
  ASSERT_TRUE(s->AddJob(FixedJob("b", "30006-30007")).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(PortsOf(d, "a"), "30005-30006");
  EXPECT_EQ(ReasonOf(d, "b"),
            "needs ports 30006-30007 free on one node; no matching node has them all "
            "(node-0: 30006 held by tasks)");
}

TEST(SchedulerPortsTest, FreedPortsCoolBeforeACountRequestGetsThem) {
  auto s = SchedulerPortsMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(CountJob("a", 2)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(1)), "a"), "30000-30001");
  ASSERT_TRUE(s->RemoveJob("a").ok());
  ASSERT_TRUE(s->AddJob(CountJob("b", 2, 2)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(2)), "b"), "30002-30003");
  ASSERT_TRUE(s->AddJob(CountJob("c", 2, 3)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(61)), "c"), "30004-30005") << "59 s after the release";
  ASSERT_TRUE(s->AddJob(CountJob("d", 2, 4)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(62)), "d"), "30000-30001") << "60 s after the release";
}

TEST(SchedulerPortsTest, ATaskThatEndedCoolsItsPortsButAnExactRequestMayTakeThem) {
  auto s = SchedulerPortsMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(FixedJob("a", "30000")).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(1)), "a"), "30000");
  ASSERT_TRUE(s->TaskFinished("a", "worker", 0).ok());
  ASSERT_TRUE(s->AddJob(CountJob("b", 1, 1)).ok());
  ASSERT_TRUE(s->AddJob(FixedJob("c", "30000")).ok());
  Decisions d = s->Schedule(T(2));
  EXPECT_EQ(PortsOf(d, "b"), "30001");
  EXPECT_EQ(PortsOf(d, "c"), "30000");
}

TEST(SchedulerPortsTest, QuarantineZeroGivesFreedPortsAtOnce) {
  auto s = SchedulerPortsMakeScheduler(1, SchedulerOptions{.port_quarantine = absl::ZeroDuration()});
  ASSERT_TRUE(s->AddJob(CountJob("a", 2)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(1)), "a"), "30000-30001");
  ASSERT_TRUE(s->RequeueJob("a").ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(2)), "a"), "30000-30001");
}

TEST(SchedulerPortsTest, AGangThatDidNotFitLeavesNoPortsCooling) {
  auto s = SchedulerPortsMakeScheduler(1);
  JobRequest big = MakeJob("big", {.tasks = 2, .gpus = 0, .memory_mb = 300 * 1024});
  big.roles[0].resource.port_count = 1;
  ASSERT_TRUE(s->AddJob(big).ok());
  EXPECT_EQ(PlacementOf(s->Schedule(T(1)), "big"), nullptr);
  ASSERT_TRUE(s->RemoveJob("big").ok());
  ASSERT_TRUE(s->AddJob(CountJob("j", 1, 1)).ok());
  EXPECT_EQ(PortsOf(s->Schedule(T(2)), "j"), "30000");
}

TEST(SchedulerPortsTest, AGangWithAnExactPortEachStartsAcrossNodes) {
  auto s = SchedulerPortsMakeScheduler(2);
  ASSERT_TRUE(s->AddJob(FixedJob("g", "30005", 2)).ok());
  Decisions d = s->Schedule(T(1));
  const JobPlacement* p = PlacementOf(d, "g");
  ASSERT_NE(p, nullptr) << ReasonOf(d, "g");
  ASSERT_EQ(p->tasks.size(), 2u);
  EXPECT_NE(p->tasks[0].node, p->tasks[1].node);
  EXPECT_EQ(p->tasks[0].allocation.ports.ToString(), "30005");
  EXPECT_EQ(p->tasks[1].allocation.ports.ToString(), "30005");
}

TEST(SchedulerPortsTest, AGangWithMoreTasksThanNodesForItsExactPortNamesThePort) {
  auto s = SchedulerPortsMakeScheduler(2);
  ASSERT_TRUE(s->AddJob(FixedJob("g", "30005-30006", 3)).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(PlacementOf(d, "g"), nullptr);
  // Two nodes can never hold three tasks that each need the same ports, so
  // the job is unschedulable, and the reason names the ports it needs.
  EXPECT_THAT(ReasonOf(d, "g"),
              ::testing::StartsWith("unschedulable: gang needs 3 worker tasks of 1024 MB memory, 1.0 vcores, "
                                    "ports 30005-30006 at once; the 2 matching nodes could hold only 2 even when empty"));
}

TEST(SchedulerPortsTest, AGangsReasonSaysHowManyNodesDoNotServeItsExactPort) {
  auto s = SchedulerPortsMakeScheduler(1);
  NodeSpec other = EightGpuNode(1);
  other.capacity.ports = Ports("40000-40999");
  ASSERT_TRUE(s->AddNode(other).ok());
  ASSERT_TRUE(s->AddJob(FixedJob("g", "30005", 2)).ok());
  // Only one node serves port 30005, so the gang can never fit.
  EXPECT_THAT(ReasonOf(s->Schedule(T(1)), "g"),
              ::testing::StartsWith("unschedulable: gang needs 2 worker tasks of 1024 MB memory, 1.0 vcores, port "
                                    "30005 at once; the 2 matching nodes could hold only 1 even when empty"));
}

}  // namespace
}  // namespace trainyard::core
