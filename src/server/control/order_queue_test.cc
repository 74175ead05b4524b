// OrderQueue alone: which orders wait, for which write, and in what order
// they are released.
#include "server/control/order_queue.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

using ::testing::ElementsAre;

DeferredOrder Launch(uint64_t job_id, int task, int attempt, const std::string& node = "n1") {
  DeferredOrder d;
  d.kind = DeferredOrder::kLaunch;
  d.node = node;
  d.job_id = job_id;
  d.job = "j" + std::to_string(job_id);
  d.task = task;
  d.spec.set_job(d.job);
  d.spec.set_job_id(job_id);
  d.spec.set_index(task);
  d.spec.set_attempt(attempt);
  return d;
}

DeferredOrder Kill(uint64_t job_id, int index, const std::string& node = "n1") {
  DeferredOrder d;
  d.kind = DeferredOrder::kKill;
  d.node = node;
  d.kill.set_job_id(job_id);
  d.kill.set_role("worker");
  d.kill.set_index(index);
  return d;
}

// "launch JOB/TASK@ATTEMPT" or "kill JOB/INDEX", in the order released.
std::vector<std::string> Names(const std::vector<DeferredOrder>& orders) {
  std::vector<std::string> out;
  for (const DeferredOrder& d : orders) {
    if (d.kind == DeferredOrder::kLaunch) {
      out.push_back("launch " + std::to_string(d.job_id) + "/" + std::to_string(d.task) + "@" +
                    std::to_string(d.spec.attempt()));
    } else {
      out.push_back("kill " + std::to_string(d.kill.job_id()) + "/" + std::to_string(d.kill.index()));
    }
  }
  return out;
}

TEST(OrderQueueTest, AnOrderWithNothingToWaitForAndNothingQueuedGoesNow) {
  OrderQueue q;
  DeferredOrder d = Launch(1, 0, 0);
  EXPECT_FALSE(q.Defer(d, 0)) << "nothing pending or in flight: the caller sends it";
  EXPECT_EQ(q.size(), 0u);
}

TEST(OrderQueueTest, OrdersWaitForTheirWriteAndGoInTheOrderTheyWereDecided) {
  OrderQueue q;
  DeferredOrder a = Launch(1, 0, 0), b = Kill(2, 0), c = Launch(3, 0, 0);
  EXPECT_TRUE(q.Defer(a, 5));
  EXPECT_TRUE(q.Defer(b, 0)) << "behind one queued: never before an order decided earlier";
  EXPECT_TRUE(q.Defer(c, 6));
  EXPECT_THAT(Names(q.Release(4, true, 0)), ElementsAre()) << "an older write releases none of them";
  EXPECT_THAT(Names(q.Release(5, true, 0)), ElementsAre("launch 1/0@0", "kill 2/0"));
  EXPECT_THAT(Names(q.Release(6, true, 0)), ElementsAre("launch 3/0@0"));
  EXPECT_EQ(q.size(), 0u);
}

TEST(OrderQueueTest, ANewerLaunchOfATaskReplacesTheOneQueuedAndAKillIsQueuedOnce) {
  OrderQueue q;
  DeferredOrder first = Launch(1, 0, 0), again = Launch(1, 0, 1), other = Launch(1, 1, 0);
  DeferredOrder kill = Kill(2, 0), kill_again = Kill(2, 0);
  ASSERT_TRUE(q.Defer(first, 3));
  ASSERT_TRUE(q.Defer(other, 3));
  ASSERT_TRUE(q.Defer(kill, 3));
  ASSERT_TRUE(q.Defer(kill_again, 3));
  ASSERT_TRUE(q.Defer(again, 4));
  EXPECT_EQ(q.size(), 4u) << "the second kill of the same task and attempt is not queued";
  EXPECT_THAT(Names(q.Release(3, true, 0)), ElementsAre("launch 1/1@0", "kill 2/0"))
      << "task 0's launch at attempt 0 is dropped: attempt 1 is queued";
  EXPECT_THAT(Names(q.Release(4, true, 0)), ElementsAre("launch 1/0@1"));
  // Released, the kill may be queued again.
  DeferredOrder kill_later = Kill(2, 0);
  EXPECT_TRUE(q.Defer(kill_later, 5));
  EXPECT_THAT(Names(q.Release(5, true, 0)), ElementsAre("kill 2/0"));
}

TEST(OrderQueueTest, AFailedWriteMovesWhatWaitedToTheNextOrReleasesItWhenNothingIsLeft) {
  OrderQueue q;
  // a waits for write 7 (in flight), b for write 8 (its changes pending).
  DeferredOrder a = Launch(1, 0, 0), b = Launch(2, 0, 0);
  ASSERT_TRUE(q.Defer(a, 7));
  ASSERT_TRUE(q.Defer(b, 8));
  EXPECT_THAT(Names(q.Release(7, false, 8)), ElementsAre()) << "write 7 failed: its records go with write 8";
  EXPECT_THAT(Names(q.Release(8, true, 0)), ElementsAre("launch 1/0@0", "launch 2/0@0"));
  // A failure with nothing left to write: what waited goes (the caller
  // checks each still holds).
  DeferredOrder c = Launch(3, 0, 0), kill = Kill(4, 0);
  ASSERT_TRUE(q.Defer(c, 9));
  ASSERT_TRUE(q.Defer(kill, 9));
  EXPECT_THAT(Names(q.Release(9, false, 0)), ElementsAre("launch 3/0@0", "kill 4/0"));
  EXPECT_EQ(q.size(), 0u);
}

TEST(OrderQueueTest, AQueuedKillStaysQueuedOnceThroughAFailedWrite) {
  OrderQueue q;
  DeferredOrder kill = Kill(2, 0), again = Kill(2, 0);
  ASSERT_TRUE(q.Defer(kill, 5));
  EXPECT_THAT(Names(q.Release(5, false, 6)), ElementsAre());
  ASSERT_TRUE(q.Defer(again, 6));
  EXPECT_EQ(q.size(), 1u) << "still queued: asked again, it is not queued twice";
  EXPECT_THAT(Names(q.Release(6, true, 0)), ElementsAre("kill 2/0"));
}

}  // namespace
}  // namespace trainyard::server
