// `-o json`: numbers as numbers, enums named as in the tables, GPU masks
// also as index lists, unset sub-messages with their defaults.
#include "cli/json_view.h"

#include "gtest/gtest.h"
#include "proto/service.pb.h"

namespace trainyard::cli {
namespace {

TEST(JsonViewTest, NumbersAreNumbersAndEnumsAreNamedAsInTheTables) {
  v1::JobView v;
  v.set_name("train");
  v.set_id(42);
  v.set_state(v1::JOB_SUCCEEDED);
  v.set_priority(v1::PRIORITY_PRODUCTION);
  v.set_framework(v1::FRAMEWORK_PYTORCH);
  v.set_submit_time_unix_ms(1'800'000'000'123);
  v1::TaskView* t = v.add_tasks();
  t->set_state(v1::TASK_RUNNING);
  t->set_gpu_mask(0b1010);
  t->set_memory_mb(4096);
  nlohmann::json j = ViewJson(v);
  EXPECT_EQ(j["id"], 42);
  EXPECT_TRUE(j["id"].is_number());
  EXPECT_EQ(j["submit_time_unix_ms"], 1'800'000'000'123);
  EXPECT_EQ(j["state"], "SUCCEEDED");
  EXPECT_EQ(j["priority"], "production");
  EXPECT_EQ(j["framework"], "pytorch");
  EXPECT_EQ(j["tasks"][0]["state"], "RUNNING");
  EXPECT_EQ(j["tasks"][0]["gpu_mask"], 10);
  EXPECT_EQ(j["tasks"][0]["gpu_mask_indices"], nlohmann::json({1, 3}));
  EXPECT_EQ(j["tasks"][0]["memory_mb"], 4096);
  EXPECT_EQ(j["tasks"][0]["last_exit"]["exit_code"], 0) << "an unset message is printed with its defaults";
  EXPECT_EQ(j["reason"], "");
}

TEST(JsonViewTest, AJobPastItsLimitShowsItsStateAndLimitAsNumbers) {
  v1::JobView v;
  v.set_state(v1::JOB_DEADLINE_EXCEEDED);
  v.set_active_deadline_ms(3000);
  v.set_deadline_unix_ms(1'800'000'003'000);
  nlohmann::json j = ViewJson(v);
  EXPECT_EQ(j["state"], "DEADLINE_EXCEEDED");
  EXPECT_EQ(j["active_deadline_ms"], 3000);
  EXPECT_EQ(j["deadline_unix_ms"], 1'800'000'003'000);
}

TEST(JsonViewTest, NodeStatesMasksAndMapsAreReadable) {
  v1::NodeView n;
  n.mutable_info()->set_state(v1::NODE_LOST);
  n.mutable_info()->set_excluded_gpus(1);
  n.mutable_info()->mutable_topology()->add_switches(3);
  n.mutable_info()->mutable_topology()->add_switches(12);
  (*n.mutable_info()->mutable_labels())["gpu"] = "a100";
  n.set_free_gpu_mask(~0ull);
  nlohmann::json j = ViewJson(n);
  EXPECT_EQ(j["info"]["state"], "LOST");
  EXPECT_EQ(j["info"]["excluded_gpus_indices"], nlohmann::json({0}));
  EXPECT_EQ(j["info"]["topology"]["switches_indices"], nlohmann::json({{0, 1}, {2, 3}}));
  EXPECT_EQ(j["info"]["labels"]["gpu"], "a100");
  EXPECT_EQ(j["free_gpu_mask"].get<uint64_t>(), ~0ull) << "64-bit values are exact";
  EXPECT_EQ(j["free_gpu_mask_indices"].size(), 64u);
}

}  // namespace
}  // namespace trainyard::cli
