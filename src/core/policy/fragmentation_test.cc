// The FGD fragmentation measure on hand-worked nodes.
#include "core/policy/fragmentation.h"

#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

FragNode Node(int64_t cpu, std::vector<int16_t> free, int32_t model = -1) {
  FragNode n;
  n.cpu_free_milli = cpu;
  n.model = model;
  n.gpu_count = static_cast<int32_t>(free.size());
  for (size_t g = 0; g < free.size(); ++g) n.free[g] = free[g];
  return n;
}

TaskShape Share(int milli, int64_t cpu = 1000) { return TaskShape{.cpu_milli = cpu, .gpu_milli = milli}; }
TaskShape Whole(int gpus, int64_t cpu = 1000) { return TaskShape{.cpu_milli = cpu, .gpus = gpus}; }

double FragOf(const FragNode& n, std::vector<TaskShape> shapes) {
  ShapeDistribution d;
  for (const TaskShape& s : shapes) d.Add(s);
  return d.Fragmentation(n);
}

TEST(FragmentationTest, WhatEachShapeCannotUse) {
  FragNode n = Node(8000, {1000, 300});
  EXPECT_EQ(FragOf(n, {Share(500)}), 300) << "the 0.3 GPU is too small for a 0.5 share";
  EXPECT_EQ(FragOf(n, {Share(200)}), 0);
  EXPECT_EQ(FragOf(n, {Whole(1)}), 300) << "a whole-GPU task cannot use a split GPU";
  EXPECT_EQ(FragOf(n, {Whole(2)}), 1300) << "does not fit at all: every free share is lost to it";
  EXPECT_EQ(FragOf(n, {Share(100, 16000)}), 1300) << "too little CPU";
  EXPECT_EQ(FragOf(n, {TaskShape{.cpu_milli = 1000}}), 1300) << "a CPU task uses no GPU";
  EXPECT_EQ(FragOf(n, {Share(500), Whole(2)}), 800) << "the mean over the shapes seen";
  EXPECT_EQ(FragOf(n, {Share(500), Share(500), Whole(2)}), (300 + 300 + 1300) / 3.0);
}

TEST(FragmentationTest, AShapeOfAnotherModelCannotUseTheNode) {
  TaskShape v100 = Share(100);
  v100.models = uint64_t{1} << 1;
  EXPECT_EQ(FragOf(Node(8000, {1000}, /*model=*/0), {v100}), 1000);
  EXPECT_EQ(FragOf(Node(8000, {1000}, /*model=*/1), {v100}), 0);
  EXPECT_EQ(FragOf(Node(8000, {1000}, /*model=*/-1), {v100}), 1000) << "unknown model";
}

TEST(FragmentationTest, PicksAreOnePerDistinctFreeShare) {
  FragNode n = Node(8000, {1000, 600, 600, 200});
  std::vector<GpuPick> picks;
  GpuPicks(n, Share(500), &picks);
  ASSERT_EQ(picks.size(), 2u);
  EXPECT_EQ(picks[0].gpus.ToString(), "0");
  EXPECT_EQ(picks[1].gpus.ToString(), "1");
  GpuPicks(n, Whole(1), &picks);
  ASSERT_EQ(picks.size(), 1u);
  EXPECT_EQ(picks[0].gpus.ToString(), "0");
  FragNode after = AfterPick(n, Share(500), picks[0]);
  EXPECT_EQ(after.free[0], 0);
  EXPECT_EQ(after.cpu_free_milli, 7000);
  EXPECT_FALSE(ShapeFits(n, Whole(2)));
  EXPECT_TRUE(ShapeFits(n, Share(600)));
  EXPECT_FALSE(ShapeFits(n, Share(600, 9000)));
}

TEST(FragmentationTest, PackingASplitGpuGrowsFragmentationLeast) {
  // A 0.5 share on a node with GPUs {1.0, 0.5}: on the split GPU it leaves
  // one whole GPU; on the whole one, two halves that whole-GPU tasks lose.
  ShapeDistribution d;
  d.Add(Share(500));
  d.Add(Whole(1));
  FragNode n = Node(8000, {1000, 500});
  std::vector<GpuPick> picks;
  GpuPicks(n, Share(500), &picks);
  ASSERT_EQ(picks.size(), 2u);
  int64_t before = d.FragmentationSum(n);
  int64_t on_whole = d.FragmentationSum(AfterPick(n, Share(500), picks[0])) - before;
  int64_t on_split = d.FragmentationSum(AfterPick(n, Share(500), picks[1])) - before;
  EXPECT_LT(on_split, on_whole);
}

TEST(FragmentationTest, TheRefinedMeasureSeesSliversAndStrandedGpus) {
  ShapeDistribution d;
  d.Add(Share(470));
  // One whole GPU: FGD sees nothing lost to a 0.47 share; two of them fit
  // and leave 0.06 that no 0.47 share can use.
  EXPECT_EQ(d.FragmentationSum(Node(8000, {1000})), 0);
  EXPECT_EQ(d.ReachFragmentationSum(Node(8000, {1000})), 60);
  // Two whole GPUs but CPU for only two shares: 0.94 of 2 GPUs used at most.
  ShapeDistribution cpu_bound;
  cpu_bound.Add(Share(470, 1000));
  EXPECT_EQ(cpu_bound.FragmentationSum(Node(2000, {1000, 1000})), 0);
  EXPECT_EQ(cpu_bound.ReachFragmentationSum(Node(2000, {1000, 1000})), 2000 - 940);
  // Whole-GPU and CPU-only shapes count as FGD counts them.
  ShapeDistribution whole;
  whole.Add(Whole(1));
  whole.Add(TaskShape{.cpu_milli = 1000});
  FragNode n = Node(8000, {1000, 300});
  EXPECT_EQ(whole.ReachFragmentationSum(n), whole.FragmentationSum(n));
}

TEST(FragmentationTest, AWeightForgetsWhatWasCounted) {
  ShapeDistribution d;
  d.Add(Share(500), 3);
  d.Add(Whole(2));
  d.Add(Share(500), -3);
  EXPECT_EQ(d.size(), 1);
  EXPECT_EQ(d.Fragmentation(Node(8000, {1000, 300})), 1300);
}

TEST(FragmentationTest, TheRefinedMeasureLeavesOutShapesOfAnotherModel) {
  // FGD counts a T4 node's free share as lost to V100 shapes, so filling
  // the T4 node looks like a gain for them; the refined measure leaves them
  // out (they have no stake in that node).
  TaskShape v100 = Whole(1);
  v100.models = uint64_t{1} << 1;
  ShapeDistribution d;
  d.Add(v100, 5);
  d.Add(Whole(1));
  FragNode t4 = Node(8000, {1000, 1000}, /*model=*/0);
  EXPECT_EQ(d.FragmentationSum(t4), 5 * 2000);
  EXPECT_EQ(d.ReachFragmentationSum(t4), 0);
  FragNode after = AfterPick(t4, Whole(1), GpuPick{.gpus = GpuSet(0b1), .milli = 1000});
  EXPECT_LT(d.FragmentationSum(after), d.FragmentationSum(t4)) << "FGD: filling it is a gain";
  EXPECT_EQ(d.ReachFragmentationSum(after), d.ReachFragmentationSum(t4));
}

TEST(FragmentationTest, PressureIsTheShareOfAModelsFreeGpusItsConstrainedDemandClaims) {
  TaskShape v100 = Whole(1);
  v100.models = uint64_t{1} << 1;
  ShapeDistribution d;
  EXPECT_FALSE(d.HasConstrainedDemand());
  d.Add(Whole(1), 3);
  d.Add(v100, 1);  // a quarter of the GPU demand needs model 1
  ASSERT_TRUE(d.HasConstrainedDemand());
  // 16 GPUs free, 4 of them model 1: a quarter of what is to come (4 GPUs,
  // and a margin) claims all of model 1's free share; model 0 is claimed by
  // nobody.
  std::vector<int32_t> p;
  d.ModelPressure({12000, 4000}, 16000, &p);
  EXPECT_EQ(p, (std::vector<int32_t>{0, 1000}));
  // 64 of 100 free GPUs are model 1's: 25 GPUs to come, give or take 5
  // (sqrt(25 tasks) of 1 GPU), three times that kept in hand: 40 of 64.
  d.ModelPressure({36000, 64000}, 100000, &p);
  EXPECT_EQ(p, (std::vector<int32_t>{0, 625}));
  EXPECT_EQ(d.PressureOn(-1, {8000, 8000}, 16000), 0) << "unknown model";
  // The price is in FragmentationSum's units (counted tasks x
  // thousandths): under full pressure a GPU costs a whole largest node.
  EXPECT_EQ(d.ScarcityCost(1000, 1000, 8), 4 * 8000);
  EXPECT_EQ(d.ScarcityCost(250, 500, 8), 4 * 8 * 250 / 2);
  // A set of two models shares its claim between them.
  TaskShape either = Whole(1);
  either.models = 0b11;
  ShapeDistribution both;
  both.Add(either);
  both.Add(Whole(1));
  both.ModelPressure({100000, 100000}, 400000, &p);
  // Half of 400 GPUs to come (200, and 3 x sqrt(200)) over the two
  // models' 200 free GPUs: all of it.
  EXPECT_EQ(p, (std::vector<int32_t>{1000, 1000}));
  both.ModelPressure({200000, 200000}, 400000, &p);
  EXPECT_EQ(p, (std::vector<int32_t>{606, 606})) << "(200 + 42.4) / 400";
  // Forgotten demand claims nothing.
  d.Add(v100, -1);
  EXPECT_FALSE(d.HasConstrainedDemand());
  d.ModelPressure({8000, 8000}, 16000, &p);
  EXPECT_EQ(p, (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace trainyard::core
