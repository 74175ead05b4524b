// GPU shares: fractions of one GPU packed onto one GPU, whole-GPU requests
// kept off partly used GPUs, GPU memory and GPU models, release, recovery,
// preemption and gangs of shares.
#include <map>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/scheduler/scheduler.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using testing::EightGpuNode;
using testing::JobArgs;
using testing::MakeJob;
using testing::PlacementOf;
using testing::ReasonOf;
using testing::T;

std::unique_ptr<Scheduler> SchedulerShareMakeScheduler(int nodes) {
  auto s = Scheduler::Create({}).value();
  for (int i = 0; i < nodes; ++i) EXPECT_TRUE(s->AddNode(EightGpuNode(i)).ok());
  return s;
}

JobRequest ShareJob(const std::string& id, int milli, JobArgs a = {}) {
  a.gpus = 0;
  JobRequest job = MakeJob(id, a);
  job.roles[0].resource.gpu_milli = milli;
  return job;
}

const TaskAssignment& SchedulerShareOnlyTask(const Decisions& d, const std::string& id) {
  const JobPlacement* p = PlacementOf(d, id);
  EXPECT_NE(p, nullptr) << id << " was not placed; reason: " << ReasonOf(d, id);
  return p->tasks.at(0);
}

const NodeState& SchedulerShareNode(const Scheduler& s, const std::string& name) {
  return s.state().node(*s.state().FindNode(name));
}

TEST(GpuShareTest, FourQuarterSharesShareOneGpuAndAFifthTakesAnother) {
  auto s = SchedulerShareMakeScheduler(1);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(s->AddJob(ShareJob(absl::StrCat("q", i), 250, {.submit = i})).ok());
  }
  Decisions d = s->Schedule(T(10));
  std::map<std::string, uint64_t> gpu;
  for (int i = 0; i < 5; ++i) {
    const TaskAssignment& t = SchedulerShareOnlyTask(d, absl::StrCat("q", i));
    EXPECT_EQ(t.allocation.gpus, 0);
    EXPECT_EQ(t.allocation.gpu_milli, 250);
    EXPECT_EQ(GpuSet(t.allocation.gpu_mask).Count(), 1);
    gpu[t.node + "/" + absl::StrCat(i)] = t.allocation.gpu_mask;
  }
  EXPECT_EQ(gpu["node-0/0"], gpu["node-0/1"]);
  EXPECT_EQ(gpu["node-0/0"], gpu["node-0/2"]);
  EXPECT_EQ(gpu["node-0/0"], gpu["node-0/3"]);
  EXPECT_NE(gpu["node-0/0"], gpu["node-0/4"]);
  // The full GPU and the split one are out of the whole-GPU view.
  const NodeState& node = SchedulerShareNode(*s, "node-0");
  EXPECT_EQ(node.free.gpus, 6);
  EXPECT_EQ(node.free.gpu_mask & (gpu["node-0/0"] | gpu["node-0/4"]), 0u);
  EXPECT_EQ(node.FreeShare(__builtin_ctzll(gpu["node-0/4"])), 750);
}

TEST(GpuShareTest, AWholeGpuRequestNeverLandsOnAPartlyUsedGpu) {
  auto s = SchedulerShareMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(ShareJob("share", 100)).ok());
  uint64_t shared = SchedulerShareOnlyTask(s->Schedule(T(1)), "share").allocation.gpu_mask;
  ASSERT_TRUE(s->AddJob(MakeJob("eight", {.gpus = 8, .submit = 2})).ok());
  Decisions d = s->Schedule(T(3));
  EXPECT_EQ(PlacementOf(d, "eight"), nullptr);
  EXPECT_THAT(ReasonOf(d, "eight"),
              ::testing::HasSubstr("needs 8 GPUs on one node; the most free on one node is 7"));
  ASSERT_TRUE(s->RemoveJob("eight").ok());
  ASSERT_TRUE(s->AddJob(MakeJob("seven", {.gpus = 7, .submit = 4})).ok());
  d = s->Schedule(T(5));
  EXPECT_EQ(SchedulerShareOnlyTask(d, "seven").allocation.gpu_mask & shared, 0u);
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").free.gpus, 0);
}

TEST(GpuShareTest, TheLastShareReleasedReturnsTheGpuToTheWholeView) {
  auto s = SchedulerShareMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(ShareJob("a", 500)).ok());
  ASSERT_TRUE(s->AddJob(ShareJob("b", 500, {.submit = 1})).ok());
  Decisions d = s->Schedule(T(2));
  uint64_t gpu = SchedulerShareOnlyTask(d, "a").allocation.gpu_mask;
  EXPECT_EQ(SchedulerShareOnlyTask(d, "b").allocation.gpu_mask, gpu);
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").free.gpus, 7);
  ASSERT_TRUE(s->TaskFinished("a", "worker", 0).ok());
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").free.gpu_mask & gpu, 0u) << "b still holds half of it";
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").FreeShare(__builtin_ctzll(gpu)), 500);
  ASSERT_TRUE(s->RemoveJob("b").ok());
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").free.gpus, 8);
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").shared, 0u);
}

TEST(GpuShareTest, GpuMemoryLimitsHowManySharesAGpuTakes) {
  auto s = Scheduler::Create({}).value();
  NodeSpec n = EightGpuNode(0);
  n.gpu_memory_mb = 16384;
  ASSERT_TRUE(s->AddNode(n).ok());
  for (int i = 0; i < 3; ++i) {
    JobRequest job = ShareJob(absl::StrCat("m", i), 100, {.submit = i});
    job.roles[0].resource.gpu_memory_mb = 8192;
    ASSERT_TRUE(s->AddJob(job).ok());
  }
  Decisions d = s->Schedule(T(5));
  EXPECT_EQ(SchedulerShareOnlyTask(d, "m0").allocation.gpu_mask, SchedulerShareOnlyTask(d, "m1").allocation.gpu_mask);
  EXPECT_NE(SchedulerShareOnlyTask(d, "m0").allocation.gpu_mask, SchedulerShareOnlyTask(d, "m2").allocation.gpu_mask)
      << "two 8 GB shares fill a 16 GB GPU";
  JobRequest big = ShareJob("too-big", 100, {.submit = 9});
  big.roles[0].resource.gpu_memory_mb = 32768;
  ASSERT_TRUE(s->AddJob(big).ok());
  EXPECT_EQ(PlacementOf(s->Schedule(T(10)), "too-big"), nullptr);
}

TEST(GpuShareTest, AGpuModelConstraintPicksNodesOfThatModel) {
  auto s = Scheduler::Create({}).value();
  NodeSpec a = EightGpuNode(0);
  a.gpu_model = "T4";
  NodeSpec b = EightGpuNode(1);
  b.gpu_model = "V100M32";
  ASSERT_TRUE(s->AddNode(a).ok());
  ASSERT_TRUE(s->AddNode(b).ok());
  JobRequest v100 = ShareJob("v100", 300);
  v100.roles[0].gpu_models = {"V100M32", "A10"};
  JobRequest a10 = MakeJob("a10", {.gpus = 1, .submit = 1});
  a10.roles[0].gpu_models = {"A10"};
  ASSERT_TRUE(s->AddJob(v100).ok());
  ASSERT_TRUE(s->AddJob(a10).ok());
  Decisions d = s->Schedule(T(2));
  EXPECT_EQ(SchedulerShareOnlyTask(d, "v100").node, "node-1");
  EXPECT_EQ(PlacementOf(d, "a10"), nullptr);
  EXPECT_THAT(ReasonOf(d, "a10"), ::testing::HasSubstr("GPU model A10"));
}

TEST(GpuShareTest, AModelFamilyAdmitsEachOfItsMemorySizes) {
  auto s = SchedulerShareMakeScheduler(0);
  for (auto [i, model] : {std::pair{0, "V100M16"}, {1, "A100M80"}}) {
    NodeSpec n = EightGpuNode(i);
    n.gpu_model = model;
    ASSERT_TRUE(s->AddNode(n).ok());
  }
  JobRequest v100 = MakeJob("v100", {.gpus = 1});
  v100.roles[0].gpu_models = {"V100"};
  JobRequest a10 = MakeJob("a10", {.gpus = 1});
  a10.roles[0].gpu_models = {"A10"};
  ASSERT_TRUE(s->AddJob(v100).ok());
  ASSERT_TRUE(s->AddJob(a10).ok());
  Decisions d = s->Schedule(T(1));
  EXPECT_EQ(SchedulerShareOnlyTask(d, "v100").node, "node-0");
  EXPECT_EQ(PlacementOf(d, "a10"), nullptr) << "A10 is not a size of the A100";
  EXPECT_THAT(ReasonOf(d, "a10"), ::testing::HasSubstr("A10"));
}

TEST(GpuShareTest, AnAdoptedShareHoldsItsShareAgain) {
  auto s = SchedulerShareMakeScheduler(1);
  ASSERT_TRUE(s->AddJob(ShareJob("rec", 600, {.tasks = 2})).ok());
  ASSERT_TRUE(s->MarkRunning("rec", T(1)).ok());
  Resource a{.memory_mb = 1024, .vcores_milli = 1000, .gpu_mask = 0b100, .gpu_milli = 600};
  ASSERT_TRUE(s->AdoptTask("rec", "worker", 0, "node-0", a).ok());
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").FreeShare(2), 400);
  EXPECT_EQ(SchedulerShareNode(*s, "node-0").free.gpu_mask & 0b100, 0u);
  absl::Status again = s->AdoptTask("rec", "worker", 1, "node-0", a);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), ::testing::HasSubstr("GPU 2 has 0.4 of its share free, 0.6 wanted"));
  Resource spans = a;
  spans.gpu_mask = 0b11;
  EXPECT_EQ(s->AdoptTask("rec", "worker", 1, "node-0", spans).code(),
            absl::StatusCode::kInvalidArgument);
  // The next share of 0.4 packs into what the adopted task left.
  ASSERT_TRUE(s->AddJob(ShareJob("fill", 400, {.submit = 2})).ok());
  EXPECT_EQ(SchedulerShareOnlyTask(s->Schedule(T(3)), "fill").allocation.gpu_mask, 0b100u);
}

TEST(GpuShareTest, PreemptingAShareVictimFreesItsShare) {
  auto s = SchedulerShareMakeScheduler(1);
  // Eight ptr jobs of 0.6 leave every GPU with 0.4 free.
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(s->AddJob(ShareJob(absl::StrCat("ptr-", i), 600,
                                   {.priority = PriorityClass::kPtr, .submit = i}))
                    .ok());
  }
  s->Schedule(T(10));
  ASSERT_EQ(SchedulerShareNode(*s, "node-0").free.gpus, 0);
  ASSERT_TRUE(s->AddJob(ShareJob("prod", 500, {.priority = PriorityClass::kProduction, .submit = 20})).ok());
  Decisions d = s->Schedule(T(30));
  ASSERT_EQ(d.preemptions.size(), 1u);
  std::string victim = d.preemptions[0].victim_job_id;
  ASSERT_TRUE(s->RequeueJob(victim).ok());
  d = s->Schedule(T(70));
  EXPECT_EQ(SchedulerShareOnlyTask(d, "prod").allocation.gpu_milli, 500);
}

TEST(GpuShareTest, AGangOfSharesPacksOntoFewGpus) {
  auto s = SchedulerShareMakeScheduler(2);
  ASSERT_TRUE(s->AddJob(ShareJob("gang", 500, {.tasks = 4})).ok());
  Decisions d = s->Schedule(T(1));
  const JobPlacement* p = PlacementOf(d, "gang");
  ASSERT_NE(p, nullptr);
  std::set<std::string> nodes;
  std::set<uint64_t> gpus;
  for (const TaskAssignment& t : p->tasks) {
    nodes.insert(t.node);
    gpus.insert(t.allocation.gpu_mask);
    EXPECT_EQ(t.allocation.gpu_milli, 500);
  }
  EXPECT_EQ(nodes.size(), 1u);
  EXPECT_EQ(gpus.size(), 2u);
}

TEST(GpuShareTest, ASpecThatMixesAShareWithWholeGpusIsRefused) {
  auto s = SchedulerShareMakeScheduler(1);
  JobRequest job = MakeJob("mixed", {.gpus = 1});
  job.roles[0].resource.gpu_milli = 500;
  EXPECT_THAT(s->AddJob(job).message(), ::testing::HasSubstr("gpu_milli 500 is a share of one GPU"));
  JobRequest whole = ShareJob("whole", 1000);
  EXPECT_THAT(s->AddJob(whole).message(), ::testing::HasSubstr("gpu_milli 1000 must be 1..999"));
}

// With the fragmentation policy an unconstrained task leaves the node of a
// model that other demand needs; the topology policy's best fit takes the
// V100 node (its switch with one GPU free is the tightest fit).
TEST(GpuShareTest, FragmentationPlacementLeavesTheScarceModelToWhoNeedsIt) {
  for (std::string policy : {"topology", "fragmentation"}) {
    SCOPED_TRACE(policy);
    auto s = Scheduler::Create({.placement = policy}).value();
    NodeSpec v100 = EightGpuNode(0);
    v100.gpu_model = "V100M32";
    NodeSpec t4 = EightGpuNode(1);
    t4.gpu_model = "T4";
    ASSERT_TRUE(s->AddNode(v100).ok());
    ASSERT_TRUE(s->AddNode(t4).ok());
    ASSERT_TRUE(s->AddJob(MakeJob("filler", {.gpus = 1})).ok());
    ASSERT_TRUE(s->MarkRunning("filler", T(0)).ok());
    Resource gpu0{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 1, .gpu_mask = 0b1};
    ASSERT_TRUE(s->AdoptTask("filler", "worker", 0, "node-0", gpu0).ok());
    JobRequest any = MakeJob("any", {.gpus = 1, .submit = 1});
    JobRequest need = MakeJob("needs-v100", {.gpus = 7, .submit = 2});
    need.roles[0].gpu_models = {"V100M32"};
    ASSERT_TRUE(s->AddJob(any).ok());
    ASSERT_TRUE(s->AddJob(need).ok());
    Decisions d = s->Schedule(T(3));
    if (policy == "topology") {
      EXPECT_EQ(SchedulerShareOnlyTask(d, "any").node, "node-0");
      EXPECT_EQ(PlacementOf(d, "needs-v100"), nullptr) << "best fit starves it";
    } else {
      EXPECT_EQ(SchedulerShareOnlyTask(d, "any").node, "node-1");
      EXPECT_EQ(SchedulerShareOnlyTask(d, "needs-v100").node, "node-0");
    }
  }
}

// One V100 node, the tightest fit for a 1-GPU task (a switch with one GPU
// free), and four T4 nodes; more of the demand seen names the T4 than the
// V100 but the V100's few GPUs are what its demand claims first. FGD's
// measure counted the V100 node's free GPUs as lost to every task that
// names the T4, so filling it looked like the best move and the tasks that
// need it waited; priced by who else can use it, unconstrained work goes
// to the T4 nodes.
TEST(GpuShareTest, ConstrainedDemandIsNotStarvedByUnconstrainedWork) {
  auto s = Scheduler::Create({.placement = "fragmentation"}).value();
  NodeSpec v100 = EightGpuNode(0);
  v100.gpu_model = "V100M32";
  ASSERT_TRUE(s->AddNode(v100).ok());
  for (int i = 1; i <= 4; ++i) {
    NodeSpec t4 = EightGpuNode(i);
    t4.gpu_model = "T4";
    ASSERT_TRUE(s->AddNode(t4).ok());
  }
  ASSERT_TRUE(s->AddJob(MakeJob("filler", {.gpus = 1})).ok());
  ASSERT_TRUE(s->MarkRunning("filler", T(0)).ok());
  Resource gpu0{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 1, .gpu_mask = 0b1};
  ASSERT_TRUE(s->AdoptTask("filler", "worker", 0, "node-0", gpu0).ok());
  // Seen: six tasks that need a T4, then four that may go anywhere, then
  // four that need the V100.
  for (int i = 0; i < 6; ++i) {
    JobRequest t4 = MakeJob(absl::StrCat("needs-t4-", i), {.gpus = 1});
    t4.roles[0].gpu_models = {"T4"};
    ASSERT_TRUE(s->AddJob(t4).ok());
    ASSERT_TRUE(s->RemoveJob(t4.id).ok());
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s->AddJob(MakeJob(absl::StrCat("any-", i), {.gpus = 1, .submit = 1 + i})).ok());
  }
  for (int i = 0; i < 4; ++i) {
    JobRequest need = MakeJob(absl::StrCat("needs-v100-", i), {.gpus = 1, .submit = 10 + i});
    need.roles[0].gpu_models = {"V100M32"};
    ASSERT_TRUE(s->AddJob(need).ok());
  }
  Decisions d = s->Schedule(T(20));
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(SchedulerShareOnlyTask(d, absl::StrCat("any-", i)).node, "node-0") << "any-" << i;
    EXPECT_EQ(SchedulerShareOnlyTask(d, absl::StrCat("needs-v100-", i)).node, "node-0") << "needs-v100-" << i;
  }
}

TEST(GpuShareTest, FragmentationPlacementKeepsWholeGpusForWholeGpuDemand) {
  // Shares and 1-GPU tasks seen; a 0.5 share goes onto the half-used GPU
  // of node-1 rather than splitting a whole GPU.
  auto s = Scheduler::Create({.placement = "fragmentation"}).value();
  ASSERT_TRUE(s->AddNode(EightGpuNode(0)).ok());
  ASSERT_TRUE(s->AddNode(EightGpuNode(1)).ok());
  Resource half{.memory_mb = 1024, .vcores_milli = 1000, .gpu_mask = 0b1, .gpu_milli = 500};
  ASSERT_TRUE(s->AddJob(ShareJob("held", 500)).ok());
  ASSERT_TRUE(s->MarkRunning("held", T(0)).ok());
  ASSERT_TRUE(s->AdoptTask("held", "worker", 0, "node-1", half).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->AddJob(MakeJob(absl::StrCat("whole-", i), {.gpus = 1, .submit = 1})).ok());
    ASSERT_TRUE(s->RemoveJob(absl::StrCat("whole-", i)).ok());
  }
  ASSERT_TRUE(s->AddJob(ShareJob("next", 500, {.submit = 2})).ok());
  const TaskAssignment& t = SchedulerShareOnlyTask(s->Schedule(T(3)), "next");
  EXPECT_EQ(t.node, "node-1");
  EXPECT_EQ(t.allocation.gpu_mask, 0b1u);
}

}  // namespace
}  // namespace trainyard::core
