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

}  // namespace
}  // namespace trainyard::core
