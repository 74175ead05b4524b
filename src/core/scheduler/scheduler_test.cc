// Scheduler: placement, gangs, constraints, pending reasons, determinism.
#include "core/scheduler/scheduler.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using testing::EightGpuNode;
using testing::JobArgs;
using testing::MakeJob;
using testing::PlacementOf;
using testing::ReasonOf;
using testing::T;

std::unique_ptr<Scheduler> SchedulerMakeScheduler(int nodes, SchedulerOptions opt = {}) {
  auto s = Scheduler::Create(opt).value();
  for (int i = 0; i < nodes; ++i) EXPECT_TRUE(s->AddNode(EightGpuNode(i)).ok());
  return s;
}

TEST(SchedulerTest, PlacesOneTaskOnOneSwitchWithPorts) {
  auto s = SchedulerMakeScheduler(1);
  JobRequest job = MakeJob("j1", {.gpus = 2});
  job.roles[0].resource.port_count = 2;
  ASSERT_TRUE(s->AddJob(job).ok());
  Decisions d = s->Schedule(T(1));
  ASSERT_EQ(d.placements.size(), 1u);
  const TaskAssignment& t = d.placements[0].tasks[0];
  EXPECT_EQ(t.node, "node-0");
  EXPECT_EQ(t.role, "worker");
  EXPECT_EQ(GpuSet(t.allocation.gpu_mask).ToString(), "0-1");
  EXPECT_EQ(t.allocation.ports.ToString(), "30000-30001");
  EXPECT_TRUE(d.pending.empty());
}

TEST(SchedulerTest, OneGpuTasksFillASwitchBeforeOpeningAnother) {
  auto s = SchedulerMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(MakeJob("a", {.gpus = 1})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("b", {.gpus = 1, .submit = 1})).ok());
  Decisions d = s->Schedule(T(2));
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_EQ(GpuSet(d.placements[0].tasks[0].allocation.gpu_mask).ToString(), "0");
  EXPECT_EQ(GpuSet(d.placements[1].tasks[0].allocation.gpu_mask).ToString(), "1");
}

TEST(SchedulerTest, GangIsAllOrNothing) {
  auto s = SchedulerMakeScheduler(3);
  ASSERT_TRUE(s->AddJob(MakeJob("small", {.gpus = 1})).ok());
  ASSERT_EQ(s->Schedule(T(0)).placements.size(), 1u);
  ASSERT_TRUE(s->AddJob(MakeJob("big", {.tasks = 3, .gpus = 8, .submit = 1})).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(ReasonOf(d, "big"), "gang needs 3 worker tasks of 8 GPUs, 1024 MB memory, 1.0 vcores "
                                "at once; only 2 fit now");
  int free = 0;
  for (NodeId n = 0; n < s->state().NodeSlots(); ++n) free += s->state().node(n).free.gpus;
  EXPECT_EQ(free, 23) << "a partial gang holds GPUs";
}

TEST(SchedulerTest, MinAvailableStartsWithFewerTasks) {
  auto s = SchedulerMakeScheduler(2);
  ASSERT_TRUE(s->AddJob(MakeJob("elastic", {.tasks = 3, .gpus = 8, .min_available = 2})).ok());
  Decisions d = s->Schedule(T(1));
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].tasks.size(), 2u);
}

TEST(SchedulerTest, GangGoesOnFewestNodes) {
  auto s = SchedulerMakeScheduler(8);
  ASSERT_TRUE(s->AddJob(MakeJob("one", {.gpus = 1})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("gang", {.tasks = 4, .gpus = 4, .submit = 1})).ok());
  Decisions d = s->Schedule(T(2));
  const JobPlacement* p = PlacementOf(d, "gang");
  ASSERT_NE(p, nullptr);
  std::set<std::string> nodes;
  for (const TaskAssignment& t : p->tasks) nodes.insert(t.node);
  EXPECT_EQ(nodes.size(), 2u);
  for (const TaskAssignment& t : p->tasks) {
    EXPECT_EQ(t.allocation.gpus, 4);
    EXPECT_NE(t.node, "node-0") << "node-0 has one GPU taken";
  }
}

TEST(SchedulerTest, GangStaysInOneRack) {
  for (uint64_t seed = 0; seed < 6; ++seed) {
    auto s = SchedulerMakeScheduler(16, SchedulerOptions{.seed = seed});  // 4 racks of 4 nodes
    ASSERT_TRUE(s->AddJob(MakeJob("gang", {.tasks = 3, .gpus = 8})).ok());
    const JobPlacement* p = PlacementOf(s->Schedule(T(1)), "gang");
    ASSERT_NE(p, nullptr);
    std::set<std::string> racks;
    for (const TaskAssignment& t : p->tasks) {
      NodeId n = *s->state().FindNode(t.node);
      racks.insert(s->state().racks()[s->state().node(n).rack]);
    }
    EXPECT_EQ(racks.size(), 1u) << "seed " << seed;
  }
}

TEST(SchedulerTest, ReasonNamesTheLargestFreeGroup) {
  auto s = SchedulerMakeScheduler(2, SchedulerOptions{.seed = 0});  // nodes in index order
  ASSERT_TRUE(s->AddJob(MakeJob("a", {.gpus = 6})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("b", {.gpus = 7, .submit = 1})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("c", {.gpus = 4, .submit = 2})).ok());
  Decisions d = s->Schedule(T(3));
  EXPECT_EQ(ReasonOf(d, "c"), "needs 4 GPUs on one node; the most free on one node is 2 (node-0)");
}

TEST(SchedulerTest, LabelSelectorsAndTheirReason) {
  auto s = Scheduler::Create({}).value();
  ASSERT_TRUE(s->AddNode(EightGpuNode(0, 4, "gpu_model=V100M16")).ok());
  ASSERT_TRUE(s->AddNode(EightGpuNode(1, 4, "gpu_model=P100")).ok());
  ASSERT_TRUE(
      s->AddJob(MakeJob("v", {.gpus = 8, .selector = "gpu_model in (V100M16, V100M32)"})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("k", {.gpus = 1, .selector = "gpu_model in (K80)"})).ok());
  Decisions d = s->Schedule(T(1));
  ASSERT_NE(PlacementOf(d, "v"), nullptr);
  EXPECT_EQ(PlacementOf(d, "v")->tasks[0].node, "node-0");
  EXPECT_EQ(ReasonOf(d, "k"), "no schedulable node matches gpu_model in (K80)");
}

TEST(SchedulerTest, NodeNameIsHardUnlessRelaxedButTheMaskNeverIs) {
  auto s = SchedulerMakeScheduler(2);
  ASSERT_TRUE(s->AddJob(MakeJob("fill", {.gpus = 8, .node = "node-1"})).ok());
  s->Schedule(T(1));
  ASSERT_TRUE(s->AddJob(MakeJob("hard", {.gpus = 1, .submit = 1, .node = "node-1"})).ok());
  JobRequest relaxed = MakeJob("relaxed", {.gpus = 2, .submit = 2, .node = "node-1", .relax = true});
  relaxed.roles[0].resource.gpu_mask = 0b1100;
  ASSERT_TRUE(s->AddJob(relaxed).ok());
  Decisions d = s->Schedule(T(3));
  EXPECT_EQ(ReasonOf(d, "hard"), "needs 1 GPU on one node; the most free on one node is 0 (node-1)");
  ASSERT_NE(PlacementOf(d, "relaxed"), nullptr);
  EXPECT_EQ(PlacementOf(d, "relaxed")->tasks[0].node, "node-0");
  EXPECT_EQ(GpuSet(PlacementOf(d, "relaxed")->tasks[0].allocation.gpu_mask).ToString(), "2-3");
}

TEST(SchedulerTest, UnknownNodeAndUnschedulableNodeReasons) {
  auto s = SchedulerMakeScheduler(1);
  ASSERT_TRUE(s->SetSchedulable("node-0", false).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("a", {.gpus = 1, .node = "node-0"})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("b", {.gpus = 1, .node = "node-9"})).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(ReasonOf(d, "a"), "node node-0 is not schedulable");
  EXPECT_EQ(ReasonOf(d, "b"), "node node-9 is not in the cluster");
  ASSERT_TRUE(s->SetSchedulable("node-0", true).ok());
  d = s->Schedule(T(2));
  EXPECT_NE(PlacementOf(d, "a"), nullptr);
}

TEST(SchedulerTest, RequestsNoNodeCanEverServeSaySo) {
  SchedulerOptions opt;
  opt.limits.max_gpus = 64;
  auto s = SchedulerMakeScheduler(2, opt);
  ASSERT_TRUE(s->AddJob(MakeJob("wide", {.gpus = 16})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("fill", {.gpus = 2})).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(ReasonOf(d, "wide"), "unschedulable: needs 16 GPUs on one node; the largest matching node is "
                                 "node-0: 8 GPUs, 524288 MB memory, 64.0 vcores");
  JobRequest masked = MakeJob("masked", {.gpus = 2, .node = PlacementOf(d, "fill")->tasks[0].node});
  masked.roles[0].resource.gpu_mask = PlacementOf(d, "fill")->tasks[0].allocation.gpu_mask;
  ASSERT_TRUE(s->AddJob(masked).ok());
  d = s->Schedule(T(2));
  EXPECT_EQ(ReasonOf(d, "masked"),
            "needs GPUs 0-1 free on one node; no matching node has them all free");
}

TEST(SchedulerTest, RequestsOutsideLimitsAreRejectedAtSubmit) {
  auto s = SchedulerMakeScheduler(1);
  absl::Status st = s->AddJob(MakeJob("huge", {.gpus = 9}));
  EXPECT_EQ(st.message(), "job huge role worker: gpus 9 is above the maximum allocation 8");
  JobRequest bad = MakeJob("bad", {.tasks = 0});
  EXPECT_EQ(s->AddJob(bad).message(), "job bad role worker: count 0 must be at least 1");
  EXPECT_TRUE(absl::IsAlreadyExists(s->AddJob(MakeJob("x", {})).ok()
                                        ? s->AddJob(MakeJob("x", {}))
                                        : absl::OkStatus()));
}

TEST(SchedulerTest, FinishedJobsFreeTheirResources) {
  auto s = SchedulerMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(MakeJob("a", {.gpus = 8})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("b", {.gpus = 8, .submit = 1})).ok());
  EXPECT_NE(PlacementOf(s->Schedule(T(1)), "a"), nullptr);
  ASSERT_TRUE(s->RemoveJob("a").ok());
  EXPECT_NE(PlacementOf(s->Schedule(T(2)), "b"), nullptr);
}

TEST(SchedulerTest, RemovingANodeRequeuesItsJobs) {
  auto s = SchedulerMakeScheduler(2);
  ASSERT_TRUE(s->AddJob(MakeJob("a", {.tasks = 2, .gpus = 8})).ok());
  s->Schedule(T(1));
  std::vector<std::string> requeued;
  ASSERT_TRUE(s->RemoveNode("node-1", &requeued).ok());
  EXPECT_THAT(requeued, ::testing::ElementsAre("a"));
  EXPECT_EQ(s->state().node(*s->state().FindNode("node-0")).free.gpus, 8);
  Decisions d = s->Schedule(T(2));
  EXPECT_EQ(ReasonOf(d, "a"), "unschedulable: gang needs 2 worker tasks of 8 GPUs, 1024 MB memory, 1.0 vcores "
                              "at once; the 1 matching node could hold only 1 even when empty (the largest is "
                              "node-0: 8 GPUs, 524288 MB memory, 64.0 vcores)");
}

TEST(SchedulerTest, SeedBreaksTiesAmongEqualNodesDeterministically) {
  auto first_node = [](uint64_t seed) {
    auto s = SchedulerMakeScheduler(16, SchedulerOptions{.seed = seed});
    EXPECT_TRUE(s->AddJob(MakeJob("a", {.gpus = 8})).ok());
    return s->Schedule(T(1)).placements.at(0).tasks.at(0).node;
  };
  EXPECT_EQ(first_node(0), "node-0");
  EXPECT_EQ(first_node(7), first_node(7));
  std::set<std::string> seen;
  for (uint64_t seed = 1; seed <= 8; ++seed) seen.insert(first_node(seed));
  EXPECT_GT(seen.size(), 1u) << "different seeds spread ties";
}

std::string Render(const Decisions& d) {
  std::string out;
  for (const JobPlacement& p : d.placements) {
    for (const TaskAssignment& t : p.tasks) {
      absl::StrAppend(&out, p.job_id, ":", t.node, ":", GpuSet(t.allocation.gpu_mask).ToString(),
                      ";");
    }
  }
  for (const PendingReason& p : d.pending) absl::StrAppend(&out, p.job_id, "=", p.reason, ";");
  return out;
}

TEST(SchedulerTest, SameInputSameDecisions) {
  std::string first;
  for (int run = 0; run < 2; ++run) {
    auto s = SchedulerMakeScheduler(16);
    for (int i = 0; i < 60; ++i) {
      ASSERT_TRUE(
          s->AddJob(MakeJob(absl::StrCat("j", i), {.tasks = 1 + i % 3, .gpus = 1 + i % 4,
                                                      .submit = i % 7}))
              .ok());
    }
    std::string out = Render(s->Schedule(T(10)));
    if (run == 0) first = out;
    EXPECT_EQ(out, first);
  }
}

}  // namespace
}  // namespace trainyard::core
