// Task resources on a real cluster, as a user reads them: agents sample
// each running task (its cgroup where it has one, else its process tree);
// `trainyard top JOB` shows CPU, memory against the limit and GPU load per
// task with the job's sum, and flags a task near its memory limit; -o json
// and the REST route carry the samples the job page charts; /metrics sums
// them per queue and user.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// One task holds 180 MiB of its 200 MiB and keeps a core busy; the other
// sleeps.
constexpr char kTaskResourcesSpec[] = R"(name: busy
replicas:
  hog:
    resources: {cpu: "1", memory: 200Mi, gpus: 1}
    command: [/usr/bin/python3, -c, "b = bytearray(180 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"]
  idle:
    resources: {cpu: 500m, memory: 512Mi}
    command: [sleep, "600"]
)";

// The newest sample of each task `top -o json` shows, by task name.
std::map<std::string, json> Newest(const json& top) {
  std::map<std::string, json> out;
  if (!top.contains("tasks")) return out;
  for (const json& t : top["tasks"]) {
    if (!t.contains("samples") || t["samples"].empty()) continue;
    json s = t["samples"].back();
    s["near_memory_limit"] = t.value("near_memory_limit", false);
    s["source"] = t.value("source", "");
    out[t["task"].get<std::string>()] = s;
  }
  return out;
}

double Field(const json& s, const char* key) {
  if (!s.contains(key)) return 0;
  const json& v = s[key];
  if (v.is_string()) {
    double d = 0;
    return absl::SimpleAtod(v.get<std::string>(), &d) ? d : 0;
  }
  return v.get<double>();
}

// The sum of the samples of `family` in a scrape (every label set).
double FamilySum(const std::string& metrics, const std::string& family) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, family + "{")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

TEST(TaskResourcesTest, TopShowsWhatEachTaskUsesAndFlagsTheOneNearItsMemoryLimit) {
  Cluster c({.nodes = 1, .server_flags = {"--task-sample-interval-ms", "300"}});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string job = c.Submit(kTaskResourcesSpec);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);

  // The hog, once it holds its memory and has run a while.
  std::map<std::string, json> now;
  json top;
  ASSERT_TRUE(WaitUntil([&] {
    CommandResult r = c.Cli({"top", job, "-o", "json"});
    if (r.exit_code != 0) return false;
    top = json::parse(r.out, nullptr, false);
    now = Newest(top);
    return now.count("busy-hog-0") && now.count("busy-idle-0") &&
           Field(now["busy-hog-0"], "memory_bytes") >= 180.0 * (1 << 20) &&
           Field(now["busy-hog-0"], "cpu_milli") >= 300;
  }, absl::Seconds(60))) << top.dump(2);
  const json hog = now["busy-hog-0"];
  const json idle = now["busy-idle-0"];
  EXPECT_TRUE(hog["near_memory_limit"].get<bool>()) << hog.dump();
  // Its cgroup allows one core per 100 ms period: a window of a few
  // periods may see up to one period more.
  EXPECT_LE(Field(hog, "cpu_milli"), 1500) << "its cgroup allows one core";
  EXPECT_EQ(Field(hog, "gpu_busy_milli"), 1000) << "a simulated GPU counts busy while held";
  EXPECT_GT(Field(hog, "gpu_memory_bytes"), 0);
  EXPECT_FALSE(idle["near_memory_limit"].get<bool>()) << idle.dump();
  EXPECT_LT(Field(idle, "memory_bytes"), 64.0 * (1 << 20)) << idle.dump();
  EXPECT_LT(Field(idle, "cpu_milli"), 200) << idle.dump();
  EXPECT_EQ(Field(idle, "gpu_busy_milli"), 0);
  EXPECT_FALSE(hog["source"].get<std::string>().empty());
  ASSERT_FALSE(top["totals"].empty());
  EXPECT_GE(Field(top["totals"].back(), "memory_bytes"), Field(hog, "memory_bytes"));

  // The table a person reads.
  CommandResult table = c.Cli({"top", job});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("MEM%"));
  EXPECT_THAT(table.out, HasSubstr("NEAR MEMORY LIMIT"));
  EXPECT_THAT(table.out, HasSubstr("1 task near its memory limit"));
  EXPECT_THAT(table.out, HasSubstr("200Mi"));

  // The REST route the job page charts.
  HttpResult rest = HttpGet(c.http_address(), "/api/v1/jobs/" + job + "/resources");
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.json["sample_fields"][2], "memory_bytes");
  bool flagged = false;
  for (const json& t : rest.json["tasks"]) {
    if (t["task"] == "busy-hog-0") {
      flagged = t["near_memory_limit"].get<bool>();
      ASSERT_FALSE(t["samples"].empty()) << rest.body;
      EXPECT_GE(t["samples"].back()[2].get<double>(), 180.0 * (1 << 20));
    }
  }
  EXPECT_TRUE(flagged) << rest.body;
  EXPECT_EQ(HttpGet(c.http_address(), "/api/v1/jobs/" + job + "/resources?from=1").status, 400);
  EXPECT_EQ(HttpGet(c.http_address(), "/api/v1/jobs/nosuch/resources").status, 404);
  CommandResult missing = c.Cli({"top", "nosuch"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("nosuch"));

  // /metrics: per queue and user, never per job or task.
  HttpResult m;
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return FamilySum(m.body, "trainyard_user_memory_used_bytes") >= 180.0 * (1 << 20);
  }, absl::Seconds(30))) << m.body;
  EXPECT_GE(MetricSample(m.body, "trainyard_tasks_near_memory_limit").value_or(0), 1.0);
  EXPECT_GE(FamilySum(m.body, "trainyard_user_gpus_busy"), 1.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_task_sample_series").value_or(0), 2.0);
  EXPECT_THAT(m.body, ::testing::Not(HasSubstr("job=\"busy\"")));

  // Once killed, its tasks no longer count.
  ASSERT_EQ(c.Cli({"kill", job}).exit_code, 0);
  ASSERT_TRUE(c.WaitForState(job, "KILLED"));
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return MetricSample(m.body, "trainyard_tasks_near_memory_limit").value_or(-1) == 0.0;
  }, absl::Seconds(30))) << m.body;
}

}  // namespace
}  // namespace trainyard::testing
