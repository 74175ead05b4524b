// The REST answer of a job's task resources: JSON a client parses, names
// escaped, every figure where sample_fields says.
#include "server/http/resource_routes.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace trainyard::server::http {
namespace {

TEST(ResourceRoutesTest, TheAnswerIsJsonWithEachSampleInTheOrderItsFieldsName) {
  v1::JobResourcesResponse r;
  r.set_job("train");
  r.set_id(42);
  r.set_sample_interval_ms(10000);
  v1::TaskResourcesView* t = r.add_tasks();
  t->set_task("train-worker-0");
  t->set_role("worker");
  t->set_node("node \"a\"\n");
  t->set_state(v1::TASK_RUNNING);
  t->set_memory_limit_bytes(int64_t{8} << 30);
  t->set_gpu_milli(500);
  t->set_source("cgroup v2");
  t->set_near_memory_limit(true);
  v1::TaskResourceSample* s = t->add_samples();
  s->set_time_unix_ms(1800000000000);
  s->set_cpu_milli(1500);
  s->set_memory_bytes(int64_t{7} << 30);
  s->set_gpu_busy_milli(250);
  s->set_gpu_memory_bytes(int64_t{3} << 30);
  r.add_tasks()->set_task("train-worker-1");  // not sampled yet
  *r.add_totals() = *s;
  nlohmann::json j = nlohmann::json::parse(JobResourcesJson(r));
  EXPECT_EQ(j["job"], "train");
  EXPECT_EQ(j["id"], 42);
  EXPECT_EQ(j["sample_interval_ms"], 10000);
  ASSERT_EQ(j["sample_fields"].size(), 5u);
  ASSERT_EQ(j["tasks"].size(), 2u);
  const nlohmann::json& w = j["tasks"][0];
  EXPECT_EQ(w["node"], "node \"a\"\n");
  EXPECT_EQ(w["state"], "RUNNING");
  EXPECT_EQ(w["near_memory_limit"], true);
  EXPECT_EQ(w["gpu_milli"], 500);
  ASSERT_EQ(w["samples"].size(), 1u);
  nlohmann::json sample;
  for (size_t i = 0; i < 5; ++i) sample[j["sample_fields"][i].get<std::string>()] = w["samples"][0][i];
  EXPECT_EQ(sample["time_unix_ms"], 1800000000000);
  EXPECT_EQ(sample["cpu_milli"], 1500);
  EXPECT_EQ(sample["memory_bytes"], int64_t{7} << 30);
  EXPECT_EQ(sample["gpu_busy_milli"], 250);
  EXPECT_EQ(sample["gpu_memory_bytes"], int64_t{3} << 30);
  EXPECT_TRUE(j["tasks"][1]["samples"].empty());
  EXPECT_EQ(j["tasks"][1]["near_memory_limit"], false);
  EXPECT_EQ(j["totals"].size(), 1u);
}

}  // namespace
}  // namespace trainyard::server::http
