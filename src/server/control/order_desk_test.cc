// OrderDesk alone: orders go now to a connected node, wait for a
// registration's answer, and (launch_after_durable) wait for their write,
// where a released launch goes only if its task is still placed as it says.
#include "server/control/order_desk.h"

#include <memory>

#include "gtest/gtest.h"
#include "server/control/job_rt.h"
#include "server/control/test_backend.h"

namespace trainyard::server {
namespace {

class OrderDeskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.Add("n1", std::make_unique<NodeRt>()).session = 7;
    nodes_.Add("n2", std::make_unique<NodeRt>());  // not connected
    auto job = std::make_unique<JobRt>();
    job->rec.set_name("train");
    job->rec.set_id(4);
    v1::TaskRecord* t = job->rec.add_tasks();
    t->set_role("worker");
    t->set_node("n1");
    t->set_state(v1::TASK_LAUNCHING);
    job->task_rt.resize(1);
    jobs_["train"] = std::move(job);
  }
  static DeferredOrder Kill(const std::string& node, int index) {
    DeferredOrder d;
    d.kind = DeferredOrder::kKill;
    d.node = node;
    d.kill.set_job("train");
    d.kill.set_job_id(4);
    d.kill.set_role("worker");
    d.kill.set_index(index);
    return d;
  }
  static DeferredOrder Launch(const std::string& node, int attempt) {
    DeferredOrder d;
    d.kind = DeferredOrder::kLaunch;
    d.node = node;
    d.job = "train";
    d.job_id = 4;
    d.task = 0;
    d.spec.set_job("train");
    d.spec.set_attempt(attempt);
    return d;
  }
  // A write goes to the store (what a deferred order waits for).
  uint64_t SendWrite() {
    persister_.MarkJob("train");
    std::optional<Persister::Write> w = persister_.Take(
        [this](const std::string& name, WriteBatch* b) { b->UpdateJob(jobs_[name]->rec); },
        [](const std::string&, WriteBatch*) {});
    return w ? w->seq : 0;
  }
  // The store answers it, and the desk hears so.
  void Answer(OrderDesk& desk, uint64_t write) {
    persister_.Done(write, {"train"}, {}, absl::OkStatus(), false);
    desk.WriteDone(write, /*ok=*/true);
  }

  testing::RecordingBackend backend_;
  Persister persister_;
  NodeTable nodes_;
  JobMap jobs_;
};

TEST_F(OrderDeskTest, AnOrderGoesNowToAConnectedNodeAndNeverToADisconnectedOne) {
  OrderDesk desk(/*after_durable=*/false, persister_, nodes_, jobs_, &backend_);
  desk.Order(Kill("n1", 0));
  desk.Order(Kill("n2", 1));
  desk.Order(Kill("gone", 2));
  ASSERT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(backend_.kills[0].first, "n1");
  EXPECT_EQ(backend_.kills[0].second.index(), 0);
}

TEST_F(OrderDeskTest, ANodesOrdersWaitForItsRegistrationsAnswerOthersDoNot) {
  OrderDesk desk(false, persister_, nodes_, jobs_, &backend_);
  nodes_.Add("n3", std::make_unique<NodeRt>()).session = 9;
  desk.HoldFor("n1");
  desk.Order(Kill("n1", 0));
  desk.Order(Kill("n3", 1));
  ASSERT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(backend_.kills[0].first, "n3");
  desk.ReleaseHeld();
  ASSERT_EQ(backend_.kills.size(), 2u);
  EXPECT_EQ(backend_.kills[1].first, "n1");
  desk.Order(Kill("n1", 2));  // held no more
  EXPECT_EQ(backend_.kills.size(), 3u);
}

TEST_F(OrderDeskTest, AfterDurableAnOrderWaitsForItsWriteAndNothingWaitsWithNoWrite) {
  OrderDesk desk(/*after_durable=*/true, persister_, nodes_, jobs_, &backend_);
  desk.Order(Kill("n1", 0));  // nothing pending or in flight: goes now
  EXPECT_EQ(backend_.kills.size(), 1u);
  uint64_t write = SendWrite();
  ASSERT_GT(write, 0u);
  desk.Order(Kill("n1", 1));
  EXPECT_EQ(backend_.kills.size(), 1u);
  EXPECT_EQ(desk.queued(), 1u);
  Answer(desk, write);
  EXPECT_EQ(backend_.kills.size(), 2u);
  EXPECT_EQ(desk.queued(), 0u);
}

TEST_F(OrderDeskTest, AFailedWritesOrdersWaitForTheNextWriteAndAReleasedLaunchCountsBeatsAfresh) {
  OrderDesk desk(true, persister_, nodes_, jobs_, &backend_);
  uint64_t write = SendWrite();
  ASSERT_GT(write, 0u);
  desk.Order(Launch("n1", 0));
  persister_.Done(write, {"train"}, {}, absl::UnavailableError("etcd"), false);  // marked again
  desk.WriteDone(write, /*ok=*/false);
  EXPECT_EQ(backend_.launches.size(), 0u) << "a launch went before what led to it was written";
  EXPECT_EQ(desk.queued(), 1u);
  uint64_t next = SendWrite();  // the failed write's records again
  ASSERT_EQ(next, write + 1);
  jobs_["train"]->task_rt[0].missing_beats = 5;
  Answer(desk, next);
  ASSERT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(jobs_["train"]->task_rt[0].missing_beats, 0) << "beats before the launch went still count";
}

TEST_F(OrderDeskTest, AReleasedLaunchGoesOnlyIfItsTaskIsStillPlacedSo) {
  OrderDesk desk(true, persister_, nodes_, jobs_, &backend_);
  uint64_t write = SendWrite();
  ASSERT_GT(write, 0u);
  desk.Order(Launch("n1", 0));
  EXPECT_EQ(backend_.launches.size(), 0u);
  Answer(desk, write);
  ASSERT_EQ(backend_.launches.size(), 1u);  // placed as it says
  EXPECT_EQ(backend_.launches[0].first, "n1");

  write = SendWrite();
  ASSERT_GT(write, 0u);
  desk.Order(Launch("n1", 0));
  jobs_["train"]->rec.mutable_tasks(0)->set_node("n2");  // moved meanwhile
  Answer(desk, write);
  EXPECT_EQ(backend_.launches.size(), 1u);

  jobs_["train"]->rec.mutable_tasks(0)->set_node("n1");
  write = SendWrite();
  ASSERT_GT(write, 0u);
  desk.Order(Launch("n1", 0));
  jobs_["train"]->ending = true;  // killed meanwhile
  Answer(desk, write);
  EXPECT_EQ(backend_.launches.size(), 1u);
}

}  // namespace
}  // namespace trainyard::server
