// GPU shares end to end: a real server and agent with two simulated A10
// GPUs. Five quarter-GPU tasks share: four on one GPU, the fifth on the
// other, each with CUDA_VISIBLE_DEVICES and TRAINYARD_GPU_SHARE; `nodes`
// and `describe` show who holds which share, and the REST views, `queues`
// and /metrics count 1.25 GPUs held; a 1-GPU task waits rather than
// land on a partly used GPU, and runs once the shares are gone; a task that
// needs another GPU model waits with a reason naming it.
#include <sys/stat.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

std::string EnvValue(const std::string& env_text, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(env_text, '\n')) {
    if (absl::ConsumePrefix(&line, key + "=")) return std::string(line);
  }
  return "<unset>";
}

std::string Job(const std::string& name, const std::string& resources, int count, const std::string& out) {
  return absl::StrCat("name: ", name, "\nreplicas:\n  worker:\n    count: ", count,
                      "\n    resources: ", resources, "\n    env: {OUT: \"", out,
                      "\"}\n    command: [sh, -c, 'env > $OUT/$TRAINYARD_TASK_NAME.env; "
                      "while [ ! -e $OUT/go ]; do sleep 0.05; done']\n");
}

// Five 0.25 shares held (four on GPU 0, one on GPU 1): every view counts
// 1.25 GPUs held and names every holder: the REST node, queue and user
// views, `trainyard queues`, /metrics.
void ExpectViewsCountSharesAsShares(Cluster& c, const std::string& queue) {
  nlohmann::json node;
  ASSERT_TRUE(WaitUntil([&] {
    node = HttpGet(c.http_address(), "/api/v1/nodes?limit=1").json["nodes"][0];
    return node["allocated_gpu_milli"] == 1250;
  }, absl::Seconds(10))) << node.dump(1);
  EXPECT_EQ(node["gpus"][0]["used_milli"], 1000);
  EXPECT_EQ(node["gpus"][0]["holders"].size(), 4u);
  EXPECT_EQ(node["gpus"][1]["used_milli"], 250);
  EXPECT_EQ(node["gpus"][1]["holders"].size(), 1u);
  nlohmann::json queues;
  ASSERT_TRUE(WaitUntil([&] {
    queues = HttpGet(c.http_address(), "/api/v1/queues").json;
    for (const auto& q : queues["queues"]) {
      if (q["name"] == queue) return q["used"]["gpu_milli"] == 1250;
    }
    return false;
  }, absl::Seconds(10))) << queues.dump(1);
  for (const auto& q : queues["queues"]) {
    if (q["name"] == queue) {
      EXPECT_EQ(q["users"][0]["used"]["gpu_milli"], 1250) << q.dump(1);
    }
  }
  EXPECT_THAT(c.Cli({"queues"}).out, HasSubstr("1.25/2"));
  std::string metrics = HttpGet(c.http_address(), "/metrics").body;
  EXPECT_EQ(MetricSample(metrics, absl::StrCat("trainyard_queue_gpus_allocated{queue=\"", queue, "\"}")), 1.25)
      << metrics;
  EXPECT_EQ(MetricSample(metrics, "trainyard_gpus{state=\"allocated\"}"), 1.25);
  EXPECT_EQ(MetricSample(metrics, "trainyard_gpus{state=\"free\"}"), 0.75);
}

TEST(GpuShareTest, QuarterSharesPackAndWholeGpusWaitForWholeGpus) {
  Cluster c({.nodes = 1, .gpus = 2, .topology = "switches=0-1;sockets=0-1",
             .agent_flags = {"--gpu-model", "A10"}});
  ASSERT_TRUE(c.WaitNodesReady(1)) << ReadFile(c.server().log());
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string shares = c.Submit(Job("quarters", "{gpus: 0.25, gpuMemory: 1Gi, cpu: 100m, memory: 64Mi}", 5, out));
  ASSERT_EQ(shares, "quarters");
  ASSERT_TRUE(c.WaitForState(shares, "RUNNING")) << c.Describe(shares).dump(2);
  std::map<std::string, int> per_gpu;
  for (int i = 0; i < 5; ++i) {
    std::string env = out + "/quarters-worker-" + std::to_string(i) + ".env";
    ASSERT_TRUE(WaitUntil([&] { return !ReadFile(env).empty(); }, absl::Seconds(20))) << env;
    std::string text = ReadFile(env);
    EXPECT_EQ(EnvValue(text, "TRAINYARD_GPU_SHARE"), "250") << text;
    EXPECT_EQ(EnvValue(text, "TRAINYARD_GPU_MEMORY_MB"), "1024") << text;
    per_gpu[EnvValue(text, "CUDA_VISIBLE_DEVICES")] += 1;
  }
  EXPECT_EQ(per_gpu, (std::map<std::string, int>{{"0", 4}, {"1", 1}}));

  // The node view: no whole GPU free; GPU 0 full with four tasks, GPU 1 a quarter.
  nlohmann::json n = c.Nodes()["nodes"][0];
  EXPECT_EQ(n["free_gpu_mask"], 0) << n.dump(2);
  EXPECT_EQ(n["info"]["gpu_model"], "A10");
  ASSERT_EQ(n["gpu_shares"].size(), 2u) << n.dump(2);
  EXPECT_EQ(n["gpu_shares"][0]["used_milli"], 1000);
  EXPECT_EQ(n["gpu_shares"][0]["tasks"].size(), 4u);
  EXPECT_EQ(n["gpu_shares"][1]["used_milli"], 250);
  CommandResult table = c.Cli({"nodes"});
  EXPECT_THAT(table.out, HasSubstr("A10"));
  EXPECT_THAT(table.out, HasSubstr("1:0.25 (quarters-worker-"));
  CommandResult describe = c.Cli({"describe", shares});
  EXPECT_THAT(describe.out, HasSubstr("(0.25 share, 1Gi)"));
  ExpectViewsCountSharesAsShares(c, c.Describe(shares)["queue"]);

  // A whole GPU: none is free, and it never takes a split one.
  std::string whole = c.Submit(Job("whole", "{gpus: 1, cpu: 100m, memory: 64Mi}", 1, out));
  std::string other = c.Submit(Job("v100", "{gpus: 0.5, gpuModel: [V100M32], cpu: 100m, memory: 64Mi}", 1, out));
  ASSERT_TRUE(WaitUntil([&] { return !c.Describe(whole)["reason"].get<std::string>().empty(); },
                      absl::Seconds(10)));
  EXPECT_EQ(c.JobState(whole), "QUEUED");
  EXPECT_THAT(c.Describe(whole)["reason"].get<std::string>(), HasSubstr("1 GPU")) << c.Describe(whole).dump(2);
  ASSERT_TRUE(WaitUntil([&] { return !c.Describe(other)["reason"].get<std::string>().empty(); },
                      absl::Seconds(10)));
  EXPECT_THAT(c.Describe(other)["reason"].get<std::string>(), HasSubstr("GPU model V100M32"));

  // The shares end; the whole-GPU task gets a whole GPU.
  WriteFile(out + "/go", "");
  ASSERT_TRUE(c.WaitForState(shares, "SUCCEEDED")) << c.Describe(shares).dump(2);
  ASSERT_TRUE(c.WaitForState(whole, "SUCCEEDED")) << c.Describe(whole).dump(2);
  std::string text = ReadFile(out + "/whole-worker-0.env");
  EXPECT_EQ(EnvValue(text, "TRAINYARD_GPU_SHARE"), "<unset>") << text;
  EXPECT_THAT(EnvValue(text, "CUDA_VISIBLE_DEVICES"), ::testing::AnyOf("0", "1"));
}


// CUDA MPS on the real path: an agent run with --mps on and a fake control
// program (a script that records its calls). Two quarter shares of one GPU
// run as clients of one daemon with their limits; the daemon stops when the
// second share ends.
TEST(GpuShareTest, SharesRunUnderOneMpsDaemonPerGpuThatStopsWithTheLastShare) {
  TempDir tools;
  std::string calls = tools.path() + "/calls";
  std::string control = tools.path() + "/nvidia-cuda-mps-control";
  WriteFile(control, absl::StrCat("#!/bin/sh\ninput=''\nif [ \"$1\" != -d ]; then input=$(cat); fi\n",
                                  "echo \"args=$* gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY ",
                                  "input=$input\" >> ", calls, "\n"));
  ASSERT_EQ(chmod(control.c_str(), 0755), 0);
  Cluster c({.nodes = 1, .gpus = 2, .topology = "switches=0-1;sockets=0-1",
             .agent_flags = {"--mps", "on", "--mps-control", control}});
  ASSERT_TRUE(c.WaitNodesReady(1)) << ReadFile(c.server().log());
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(Job("mps", "{gpus: 0.25, gpuMemory: 1Gi, cpu: 100m, memory: 64Mi}", 2, out));
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  std::string pipe = c.dir() + "/node-0/mps/gpu-0/pipe";
  for (int i = 0; i < 2; ++i) {
    std::string env = out + "/mps-worker-" + std::to_string(i) + ".env";
    ASSERT_TRUE(WaitUntil([&] { return !ReadFile(env).empty(); }, absl::Seconds(20))) << env;
    std::string text = ReadFile(env);
    EXPECT_EQ(EnvValue(text, "CUDA_MPS_PIPE_DIRECTORY"), pipe) << text;
    EXPECT_EQ(EnvValue(text, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25") << text;
    EXPECT_EQ(EnvValue(text, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=1024M") << text;
    EXPECT_EQ(EnvValue(text, "CUDA_VISIBLE_DEVICES"), "0") << text;
  }
  EXPECT_EQ(ReadFile(calls), absl::StrCat("args=-d gpu=0 pipe=", pipe, " input=\n"));
  WriteFile(out + "/go", "");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(ReadFile(calls), "input=quit"); }, absl::Seconds(20)))
      << ReadFile(calls);
  EXPECT_EQ(ReadFile(calls), absl::StrCat("args=-d gpu=0 pipe=", pipe, " input=\n", "args= gpu=0 pipe=", pipe,
                                          " input=quit\n"));
}

}  // namespace
}  // namespace trainyard::testing
