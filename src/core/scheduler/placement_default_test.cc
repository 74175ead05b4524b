// The fragmentation placement as the scheduler runs it: the default, every
// node that fits scored (not the first few in bucket order), multi-GPU
// tasks placed by topology.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/policy/placement_policy.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using testing::EightGpuNode;
using testing::JobArgs;
using testing::MakeJob;
using testing::PlacementOf;
using testing::T;

NodeSpec OneGpuNode(const std::string& name, const std::string& model) {
  NodeSpec n;
  n.name = name;
  n.gpu_model = model;
  n.capacity = Resource{.memory_mb = 64 * 1024, .vcores_milli = 16000, .gpus = 1};
  n.topology = GpuTopology::FromSpec(DefaultTopologySpec(1)).value();
  return n;
}

const TaskAssignment& OnlyTask(const Decisions& d, const std::string& id) {
  const JobPlacement* p = PlacementOf(d, id);
  EXPECT_NE(p, nullptr) << id << " was not placed";
  static const TaskAssignment kNone;
  return p == nullptr || p->tasks.empty() ? kNone : p->tasks.front();
}

TEST(PlacementDefaultTest, TheDefaultIsFragmentationAndTopologyStaysAChoice) {
  EXPECT_EQ(SchedulerOptions{}.placement, "fragmentation");
  EXPECT_EQ(MakePlacementPolicy("").value()->Name(), "fragmentation");
  EXPECT_EQ(PlacementPolicyNames().front(), "fragmentation");
  EXPECT_EQ(MakePlacementPolicy("topology").value()->Name(), "topology");
  auto s = Scheduler::Create({});
  ASSERT_TRUE(s.ok()) << s.status();
}

// Twenty-four T4 nodes come first in the index, one G2 node last; a gang of
// 24 T4-only tasks and one task that may use any model arrive together. The
// unconstrained task must take the G2 GPU, or the gang cannot be placed:
// only a search that sees past the first nodes in bucket order finds it.
TEST(PlacementDefaultTest, EveryNodeThatFitsIsScored) {
  SchedulerOptions o;
  o.seed = 0;  // index order: the G2 node is the last one visited
  auto s = Scheduler::Create(o).value();
  for (int i = 0; i < 24; ++i) {
    ASSERT_TRUE(s->AddNode(OneGpuNode(absl::StrCat("t4-", i), "T4")).ok());
  }
  ASSERT_TRUE(s->AddNode(OneGpuNode("g2", "G2")).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("any", {.submit = 0})).ok());
  JobRequest gang = MakeJob("t4s", {.tasks = 24, .submit = 1});
  gang.roles[0].gpu_models = {"T4"};
  ASSERT_TRUE(s->AddJob(gang).ok());
  Decisions d = s->Schedule(T(2));
  EXPECT_EQ(OnlyTask(d, "any").node, "g2");
  ASSERT_NE(PlacementOf(d, "t4s"), nullptr);
  EXPECT_EQ(PlacementOf(d, "t4s")->tasks.size(), 24u);
}

// A large cluster of nodes in one state is not walked node by node: the
// placements still all land, and nodes in the same state cost the same.
TEST(PlacementDefaultTest, ManyEqualNodesAllFill) {
  auto s = Scheduler::Create({}).value();
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(s->AddNode(EightGpuNode(i)).ok());
  for (int i = 0; i < 2400; ++i) {
    ASSERT_TRUE(s->AddJob(MakeJob(absl::StrCat("j", i), {.submit = i})).ok());
  }
  Decisions d = s->Schedule(T(3000));
  EXPECT_EQ(d.placements.size(), 2400u);
  EXPECT_TRUE(d.pending.empty());
}

TEST(PlacementDefaultTest, AMultiGpuTaskTakesOneSwitchPair) {
  auto s = Scheduler::Create({}).value();
  ASSERT_TRUE(s->AddNode(EightGpuNode(0)).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("one", {.gpus = 1, .submit = 0})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("pair", {.gpus = 2, .submit = 1})).ok());
  Decisions d = s->Schedule(T(2));
  uint64_t pair = OnlyTask(d, "pair").allocation.gpu_mask;
  // Switches are GPUs 0-1, 2-3, 4-5, 6-7.
  EXPECT_TRUE(pair == 0b11 || pair == 0b1100 || pair == 0b110000 || pair == 0b11000000) << pair;
  EXPECT_EQ(pair & OnlyTask(d, "one").allocation.gpu_mask, 0u);
}

}  // namespace
}  // namespace trainyard::core
