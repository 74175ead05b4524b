// Tests of the allocation and fragmentation measures on the default 8-GPU
// topology (switches of 2, sockets 0-3 and 4-7), worked out by hand.
#include "sim/cluster_meter.h"

#include "gtest/gtest.h"
#include "sim/trace.h"

namespace trainyard::sim {
namespace {

core::GpuTopology Topology(int gpus) {
  auto t = core::GpuTopology::FromSpec(DefaultTopologySpec(gpus));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : core::GpuTopology();
}

TEST(TightestLevelTest, SwitchThenSocketThenNode) {
  core::GpuTopology t = Topology(8);
  EXPECT_EQ(TightestLevel(t, core::GpuSet(0b11), 2), 1);
  EXPECT_EQ(TightestLevel(t, core::GpuSet(0b0101), 2), 2);
  EXPECT_EQ(TightestLevel(t, core::GpuSet(0b00010001), 2), 3);
  EXPECT_EQ(TightestLevel(t, core::GpuSet(0b1), 2), 4);
}

TEST(ClusterMeterTest, IdleClusterIsNotFragmented) {
  ClusterMeter m;
  m.AddNode(0, Topology(8));
  m.AddNode(1, Topology(2));
  EXPECT_EQ(m.total_gpus(), 10);
  EXPECT_EQ(m.free_gpus(), 10);
  EXPECT_DOUBLE_EQ(m.AllocationRatio(), 0);
  EXPECT_DOUBLE_EQ(m.Fragmentation(0), 0);
  EXPECT_DOUBLE_EQ(m.Fragmentation(1), 0);
}

TEST(ClusterMeterTest, ScatteredFreeGpusCannotServeFour) {
  ClusterMeter m;
  m.AddNode(0, Topology(8));
  m.AddNode(1, Topology(8));
  m.AddNode(2, Topology(2));  // too small to count for 4 or 8
  // Node 0: GPUs 0,2,4,6 free: 4 free but no socket has 4 free.
  m.Update(0, core::GpuSet(0b01010101));
  // Node 1: GPUs 0-3 free: socket 0 serves 4; nothing serves 8.
  m.Update(1, core::GpuSet(0b00001111));
  EXPECT_EQ(m.free_gpus(), 10);
  EXPECT_DOUBLE_EQ(m.AllocationRatio(), 8.0 / 18.0);
  EXPECT_DOUBLE_EQ(m.Fragmentation(0), 4.0 / 8.0);  // node 0's 4 of 8 counted
  EXPECT_DOUBLE_EQ(m.Fragmentation(1), 8.0 / 8.0);  // no node has 8 free
  m.Update(0, core::GpuSet(0xff));
  EXPECT_DOUBLE_EQ(m.Fragmentation(0), 0);
  EXPECT_DOUBLE_EQ(m.Fragmentation(1), 4.0 / 12.0);
}

}  // namespace
}  // namespace trainyard::sim
