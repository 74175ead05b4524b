// The queue and user view the REST API and the dashboard serve: GPU shares
// counted as shares.
#include "server/http/json_views.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::server::http {
namespace {

// A running job of `user` in queue "default" whose tasks hold GPU 0 of
// node "n" as a share of `milli` each, or (milli 0) GPUs `mask` whole.
std::shared_ptr<const v1::JobView> Job(const std::string& user, int tasks, int milli,
                                       uint64_t mask = 1) {
  auto v = std::make_shared<v1::JobView>();
  v->set_user(user);
  v->set_queue("default");
  v->set_state(v1::JOB_RUNNING);
  for (int i = 0; i < tasks; ++i) {
    v1::TaskView* t = v->add_tasks();
    t->set_state(v1::TASK_RUNNING);
    t->set_node("n");
    t->set_gpu_mask(mask);
    t->set_gpu_milli(milli);
  }
  return v;
}

TEST(QueuesJsonTest, AShareCountsAsItsShareNotAsAWholeGpu) {
  v1::ListQueuesResponse queues;
  queues.add_queues()->set_name("default");
  // Four 0.25 shares of one GPU (alice) and one task on two whole GPUs (bob).
  nlohmann::json j = QueuesJson(queues, {Job("alice", 4, 250), Job("bob", 1, 0, 0b110)});
  const nlohmann::json& users = j["queues"][0]["users"];
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users[0]["user"], "alice");
  EXPECT_EQ(users[0]["used"]["gpus"], 0);
  EXPECT_EQ(users[0]["used"]["gpu_milli"], 1000);
  EXPECT_EQ(users[1]["user"], "bob");
  EXPECT_EQ(users[1]["used"]["gpus"], 2);
  EXPECT_EQ(users[1]["used"]["gpu_milli"], 2000);
}

TEST(JobJsonTest, AJobShowsItsTimeLimitAndWhenItRunsOut) {
  v1::JobView v;
  v.set_state(v1::JOB_DEADLINE_EXCEEDED);
  v.set_start_time_unix_ms(1'800'000'000'000);
  v.set_active_deadline_ms(3000);
  v.set_deadline_unix_ms(1'800'000'003'000);
  nlohmann::json j = JobJson(v, false);
  EXPECT_EQ(j["state"], "DEADLINE_EXCEEDED");
  EXPECT_EQ(j["active_deadline_ms"], 3000);
  EXPECT_EQ(j["deadline_unix_ms"], 1'800'000'003'000);
}

TEST(QueuesJsonTest, AQueueShowsItsTimeLimits) {
  v1::ListQueuesResponse queues;
  v1::QueueView* q = queues.add_queues();
  q->set_name("research");
  q->set_max_time_ms(24 * 3600 * 1000);
  q->set_default_time_ms(2 * 3600 * 1000);
  nlohmann::json j = QueuesJson(queues, {});
  EXPECT_EQ(j["queues"][0]["max_time_ms"], 24 * 3600 * 1000);
  EXPECT_EQ(j["queues"][0]["default_time_ms"], 2 * 3600 * 1000);
}

}  // namespace
}  // namespace trainyard::server::http
