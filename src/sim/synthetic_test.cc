// Tests of the synthetic workload generator and its option checks.
#include "sim/synthetic.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::sim {
namespace {

TEST(SyntheticTest, GangsWithRemainder) {
  SyntheticOptions o{.nodes = 3, .gpus_per_node = 8, .tasks = 10, .gang = 4, .gpus_per_task = 2};
  ASSERT_TRUE(ValidateSynthetic(o).ok());
  NodeList nodes = SyntheticNodes(o);
  ASSERT_EQ(nodes.nodes.size(), 3u);
  EXPECT_EQ(nodes.nodes[2].name, "syn-node-00002");
  EXPECT_EQ(nodes.nodes[2].gpus, 8);
  Trace trace = SyntheticTrace(o);
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.task_count, 10);
  EXPECT_EQ(trace.jobs[0].TaskCount(), 4);
  EXPECT_EQ(trace.jobs[2].TaskCount(), 2);
  EXPECT_EQ(trace.jobs[0].GpuCount(), 8);
  EXPECT_EQ(trace.jobs[0].duration_s, kRunsForever);
  // A 2-GPU task takes 2/8 of a node's CPU and memory.
  EXPECT_EQ(trace.jobs[0].roles[0].cpu_milli, o.cpu_milli_per_node / 4);
}

TEST(SyntheticTest, BadOptionsNameTheFlag) {
  SyntheticOptions o{.nodes = 2, .gpus_per_node = 8, .tasks = 10, .gang = 1, .gpus_per_task = 16};
  EXPECT_THAT(std::string(ValidateSynthetic(o).message()),
              ::testing::HasSubstr("--gpus-per-task 16 is above --gpus-per-node 8"));
  o.gpus_per_task = 1;
  o.nodes = 0;
  EXPECT_THAT(std::string(ValidateSynthetic(o).message()),
              ::testing::HasSubstr("--synthetic-nodes 0 is outside"));
  o.nodes = 1;
  o.gang = 0;
  EXPECT_THAT(std::string(ValidateSynthetic(o).message()), ::testing::HasSubstr("--gang 0"));
}

}  // namespace
}  // namespace trainyard::sim
