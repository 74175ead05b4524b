// HeartbeatDelta: what an agent's heartbeats carry when the server takes
// deltas: a full report first, when the GPU or port use changes, and every
// full_every beats; else a delta without them (and without an unmoved free
// disk); every beat whole for a server that takes none.
#include "agent/heartbeat_delta.h"

#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

v1::Heartbeat Beat(uint64_t busy, uint32_t port, int64_t free_mb) {
  v1::Heartbeat hb;
  hb.set_busy_gpu_mask(busy);
  v1::PortRange* r = hb.add_ports_in_use();
  r->set_begin(port);
  r->set_end(port);
  hb.set_data_free_mb(free_mb);
  hb.add_tasks()->set_job("j");
  return hb;
}

TEST(HeartbeatDeltaTest, SendsOnlyWhatChangedAndAFullReportEveryN) {
  HeartbeatDelta delta(3);
  v1::Heartbeat hb = Beat(1, 22, 100);
  EXPECT_TRUE(delta.Apply(&hb)) << "a stream's first heartbeat is full";
  EXPECT_FALSE(hb.use_unchanged());
  EXPECT_EQ(hb.ports_in_use_size(), 1);
  hb = Beat(1, 22, 100);
  EXPECT_FALSE(delta.Apply(&hb));
  EXPECT_TRUE(hb.use_unchanged());
  EXPECT_EQ(hb.ports_in_use_size(), 0);
  EXPECT_EQ(hb.busy_gpu_mask(), 0u);
  EXPECT_FALSE(hb.has_data_free_mb());
  EXPECT_EQ(hb.tasks_size(), 1) << "the task list is always whole";
  hb = Beat(1, 22, 90);
  EXPECT_FALSE(delta.Apply(&hb));
  EXPECT_TRUE(hb.use_unchanged());
  EXPECT_EQ(hb.data_free_mb(), 90) << "a free disk that moved goes in the delta";
  hb = Beat(1, 22, 90);
  EXPECT_TRUE(delta.Apply(&hb)) << "every third beat is full";
  EXPECT_EQ(hb.ports_in_use_size(), 1);
  hb = Beat(1, 23, 90);
  EXPECT_TRUE(delta.Apply(&hb)) << "a port opened: full";
  EXPECT_EQ(hb.ports_in_use(0).begin(), 23u);
  hb = Beat(3, 23, 90);
  EXPECT_TRUE(delta.Apply(&hb)) << "a GPU got busy: full";
  EXPECT_EQ(hb.busy_gpu_mask(), 3u);
}

TEST(HeartbeatDeltaTest, AServerThatTakesNoDeltasGetsEveryBeatWhole) {
  HeartbeatDelta delta(0);
  for (int i = 0; i < 3; ++i) {
    v1::Heartbeat hb = Beat(1, 22, 100);
    EXPECT_TRUE(delta.Apply(&hb));
    EXPECT_FALSE(hb.use_unchanged());
    EXPECT_EQ(hb.ports_in_use_size(), 1);
  }
}

}  // namespace
}  // namespace trainyard::agent
