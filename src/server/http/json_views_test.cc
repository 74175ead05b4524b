// The queue, user and node views the REST API and the dashboard serve: GPU
// shares counted as shares, every holder of a split GPU named.
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

TEST(QueuesJsonTest, AQueuesUseShowsItsGpuShareInThousandths) {
  v1::ListQueuesResponse queues;
  v1::QueueView* q = queues.add_queues();
  q->set_name("default");
  q->mutable_used()->set_gpus(2);
  q->mutable_used()->set_gpu_milli(3000);  // two whole GPUs and four 0.25 shares
  nlohmann::json j = QueuesJson(queues, {Job("alice", 4, 250), Job("bob", 1, 0, 0b110)});
  EXPECT_EQ(j["queues"][0]["used"]["gpus"], 2);
  EXPECT_EQ(j["queues"][0]["used"]["gpu_milli"], 3000);
}

// A node of 4 GPUs: GPU 0 whole (job "whole"), GPU 1 split 0.25 + 0.5
// between jobs "small" and "half", GPU 2 free, GPU 3 excluded.
v1::NodeView SplitNode() {
  v1::NodeView n;
  n.mutable_info()->set_name("n");
  n.mutable_info()->mutable_topology()->set_gpu_count(4);
  n.mutable_info()->set_excluded_gpus(0b1000);
  n.set_free_gpu_mask(0b0100);
  v1::GpuShareView* share = n.add_gpu_shares();
  share->set_gpu(1);
  share->set_used_milli(750);
  share->add_tasks("half-worker-0");
  share->add_tasks("small-worker-0");
  return n;
}

std::shared_ptr<const v1::JobView> Named(const std::string& name, uint64_t mask, int milli) {
  auto j = std::const_pointer_cast<v1::JobView>(Job("alice", 1, milli, mask));
  j->set_name(name);
  j->mutable_tasks(0)->set_name(name + "-worker-0");
  return j;
}

TEST(NodeJsonTest, ASplitGpuShowsTheShareHeldAndEveryHolder) {
  GpuHolders holders = GpuHoldersOf({Named("whole", 0b1, 0), Named("small", 0b10, 250), Named("half", 0b10, 500)});
  nlohmann::json j = NodeJson(SplitNode(), holders["n"]);
  const nlohmann::json& gpus = j["gpus"];
  EXPECT_EQ(gpus[0]["used_milli"], 1000);
  EXPECT_EQ(gpus[0]["holders"].size(), 1u);
  EXPECT_EQ(gpus[1]["state"], "used");
  EXPECT_EQ(gpus[1]["used_milli"], 750);
  ASSERT_EQ(gpus[1]["holders"].size(), 2u) << gpus[1].dump();
  EXPECT_EQ(gpus[1]["holders"][0]["job"], "small");
  EXPECT_EQ(gpus[1]["holders"][1]["job"], "half");
  EXPECT_EQ(gpus[1]["holders"][1]["task"], "half-worker-0");
  EXPECT_EQ(gpus[2]["used_milli"], 0);
  EXPECT_EQ(gpus[3]["used_milli"], 0);
  EXPECT_EQ(j["allocated_gpus"], 2);
  EXPECT_EQ(j["allocated_gpu_milli"], 1750);
}

TEST(NodeJsonTest, GpuCountsTakeAShareAsItsFraction) {
  GpuCounts c = GpuCountsOf(SplitNode());
  EXPECT_EQ(c.allocated, 2);
  EXPECT_EQ(c.allocated_milli, 1750);
  EXPECT_DOUBLE_EQ(c.AllocatedGpus(), 1.75);
  EXPECT_DOUBLE_EQ(c.FreeGpus(), 1.25);
}

TEST(NodeJsonTest, AFaultyGpuIsExcludedAndShowsItsFault) {
  v1::NodeView n = SplitNode();
  n.set_free_gpu_mask(0);  // GPU 2's fault took it out of service
  v1::GpuFault* f = n.mutable_info()->add_gpu_faults();
  f->set_gpu(2);
  f->set_xid(48);
  f->set_action(v1::GPU_FAULT_EXCLUDE_GPU);
  f->set_message("Xid 48 (double-bit ECC error): NVRM: ...");
  f->set_time_unix_ms(1234);
  nlohmann::json j = NodeJson(n, {});
  EXPECT_EQ(j["gpus"][2]["state"], "excluded");
  EXPECT_EQ(j["gpus"][2]["fault"]["xid"], 48);
  EXPECT_EQ(j["gpus"][2]["fault"]["action"], "exclude_gpu");
  EXPECT_EQ(j["gpus"][2]["fault"]["time_unix_ms"], 1234);
  EXPECT_TRUE(j["gpus"][0]["fault"].is_null());
  EXPECT_EQ(j["faulty_gpus"], nlohmann::json::array({2}));
  EXPECT_EQ(j["excluded_gpus"], nlohmann::json::array({2, 3}));
  GpuCounts c = GpuCountsOf(n);
  EXPECT_EQ(c.excluded, 2);
  EXPECT_EQ(c.free, 0);
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
