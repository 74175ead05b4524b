// HeartbeatDelta: what an agent's heartbeats carry when the server takes
// deltas: a full report first, when the GPU or port use changes, and every
// full_every beats; else a delta without them (and without an unmoved free
// disk); every beat whole for a server that takes none. And which beats are
// left out: one with nothing new, until the quiet interval has passed.
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
  v1::TaskStatus* t = hb.add_tasks();
  t->set_job("j");
  t->set_state(v1::TASK_RUNNING);
  t->set_time_unix_ms(7);
  return hb;
}

TEST(HeartbeatDeltaTest, SendsOnlyWhatChangedAndAFullReportEveryN) {
  HeartbeatDelta delta(3);
  v1::Heartbeat hb = Beat(1, 22, 100);
  EXPECT_TRUE(delta.Apply(&hb, absl::UnixEpoch())) << "a stream's first heartbeat is full";
  EXPECT_FALSE(hb.use_unchanged());
  EXPECT_EQ(hb.ports_in_use_size(), 1);
  hb = Beat(1, 22, 100);
  EXPECT_FALSE(delta.Apply(&hb, absl::UnixEpoch()));
  EXPECT_TRUE(hb.use_unchanged());
  EXPECT_EQ(hb.ports_in_use_size(), 0);
  EXPECT_EQ(hb.busy_gpu_mask(), 0u);
  EXPECT_FALSE(hb.has_data_free_mb());
  EXPECT_EQ(hb.tasks_size(), 1) << "the task list is always whole";
  hb = Beat(1, 22, 90);
  EXPECT_FALSE(delta.Apply(&hb, absl::UnixEpoch()));
  EXPECT_TRUE(hb.use_unchanged());
  EXPECT_EQ(hb.data_free_mb(), 90) << "a free disk that moved goes in the delta";
  hb = Beat(1, 22, 90);
  EXPECT_TRUE(delta.Apply(&hb, absl::UnixEpoch())) << "every third beat is full";
  EXPECT_EQ(hb.ports_in_use_size(), 1);
  hb = Beat(1, 23, 90);
  EXPECT_TRUE(delta.Apply(&hb, absl::UnixEpoch())) << "a port opened: full";
  EXPECT_EQ(hb.ports_in_use(0).begin(), 23u);
  hb = Beat(3, 23, 90);
  EXPECT_TRUE(delta.Apply(&hb, absl::UnixEpoch())) << "a GPU got busy: full";
  EXPECT_EQ(hb.busy_gpu_mask(), 3u);
}

TEST(HeartbeatDeltaTest, AServerThatTakesNoDeltasGetsEveryBeatWhole) {
  HeartbeatDelta delta(0);
  for (int i = 0; i < 3; ++i) {
    v1::Heartbeat hb = Beat(1, 22, 100);
    EXPECT_TRUE(delta.Apply(&hb, absl::UnixEpoch()));
    EXPECT_FALSE(hb.use_unchanged());
    EXPECT_EQ(hb.ports_in_use_size(), 1);
  }
}

TEST(HeartbeatDeltaTest, ABeatWithNothingNewIsLeftOutUntilTheQuietIntervalHasPassed) {
  HeartbeatDelta delta(30, absl::Seconds(3));
  absl::Time t0 = absl::FromUnixSeconds(1000);
  v1::Heartbeat hb = Beat(1, 22, 100);
  EXPECT_FALSE(delta.Quiet(hb, t0)) << "a stream's first beat always goes";
  delta.Apply(&hb, t0);

  hb = Beat(1, 22, 100);
  hb.mutable_tasks(0)->set_time_unix_ms(8);  // the beat's own time is no news
  EXPECT_TRUE(delta.Quiet(hb, t0 + absl::Seconds(1)));
  EXPECT_EQ(delta.QuietUntil(), t0 + absl::Seconds(3)) << "when the next beat goes whatever it says";
  hb.set_data_free_mb(90);
  EXPECT_TRUE(delta.Quiet(hb, t0 + absl::Seconds(2))) << "free disk alone goes with the next beat sent";
  EXPECT_FALSE(delta.Quiet(hb, t0 + absl::Seconds(3))) << "the quiet interval since the last beat sent";
  delta.Apply(&hb, t0 + absl::Seconds(3));
  EXPECT_EQ(hb.data_free_mb(), 90);

  absl::Time t1 = t0 + absl::Seconds(4);  // one second after that beat
  hb = Beat(1, 22, 90);
  EXPECT_TRUE(delta.Quiet(hb, t1));
  hb = Beat(1, 22, 90);
  hb.mutable_tasks(0)->set_state(v1::TASK_SUCCEEDED);
  EXPECT_FALSE(delta.Quiet(hb, t1)) << "a task's state changed";
  hb = Beat(1, 22, 90);
  hb.add_tasks()->set_job("k");
  EXPECT_FALSE(delta.Quiet(hb, t1)) << "a task more";
  hb = Beat(1, 22, 90);
  hb.clear_tasks();
  EXPECT_FALSE(delta.Quiet(hb, t1)) << "a task less";
  EXPECT_FALSE(delta.Quiet(Beat(3, 22, 90), t1)) << "a GPU got busy";
  EXPECT_FALSE(delta.Quiet(Beat(1, 23, 90), t1)) << "a port opened";
  hb = Beat(1, 22, 90);
  hb.add_images("oci:/srv/images/torch:2.1");
  hb.set_images_given(true);
  EXPECT_FALSE(delta.Quiet(hb, t1)) << "images changed";
}

TEST(HeartbeatDeltaTest, EveryBeatGoesWithoutAQuietIntervalOrToAServerThatTakesNoDeltas) {
  absl::Time t0 = absl::FromUnixSeconds(1000);
  for (HeartbeatDelta delta : {HeartbeatDelta(30), HeartbeatDelta(0, absl::Seconds(3))}) {
    v1::Heartbeat hb = Beat(1, 22, 100);
    delta.Apply(&hb, t0);
    EXPECT_FALSE(delta.Quiet(Beat(1, 22, 100), t0 + absl::Seconds(1)));
    EXPECT_EQ(delta.QuietUntil(), absl::InfiniteFuture());
  }
}

}  // namespace
}  // namespace trainyard::agent
