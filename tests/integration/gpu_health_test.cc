// GPU health end to end: a server and two agents with simulated GPUs as
// processes. An Xid line of the driver appended to an agent's GPU event file
// (as the kernel's log would carry it) takes the GPU out of service: its
// task stops and runs again on a healthy GPU, charged to its GPU-error
// budget; `nodes`, `node describe` and /metrics show the faulty GPU. An Xid
// that asks for a reboot drains the node, and its task moves again. An admin
// cordons a single GPU: no task lands on it until it is uncordoned.
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = R"(
name: healthy
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 1}
    command: [sleep, '600']
    restartPolicy: OnFailure
    maxRestarts: 1
)";

struct Where {
  std::string node;
  int gpu = -1;
  int attempt = -1;
  std::string state;
  std::string last_class;
};

Where WorkerOf(Cluster& c, const std::string& job) {
  Where w;
  nlohmann::json d = c.Describe(job);
  for (const auto& t : d.value("tasks", nlohmann::json::array())) {
    if (t.value("role", "") != "worker") continue;
    w.node = t.value("node", "");
    w.state = t.value("state", "");
    w.attempt = t.value("attempt", 0);
    if (t.contains("gpu_mask_indices") && t["gpu_mask_indices"].size() == 1) w.gpu = t["gpu_mask_indices"][0];
    if (t.contains("attempts") && !t["attempts"].empty()) w.last_class = t["attempts"].back().value("attempt_class", "");
  }
  return w;
}

// Appends the driver's line for simulated GPU `gpu` (PCI bus gpu+1) of `node`.
void InjectXid(Cluster& c, const std::string& node, int gpu, int xid, const std::string& what) {
  std::ofstream out(c.dir() + "/" + node + "/gpu-events", std::ios::app);
  out << absl::StrFormat("[ 4242.000001] NVRM: Xid (PCI:0000:%02x:00): %d, pid=4242, name=python3, %s\n", gpu + 1, xid,
                         what);
}

TEST(GpuHealthTest, AFaultyGpuIsTakenOutItsTaskMovesAndAnXidAskingForARebootDrainsTheNode) {
  Cluster c({.nodes = 2, .gpus = 2, .topology = "switches=0-1;sockets=0-1"});
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(kJob);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(1);
  Where first = WorkerOf(c, job);
  ASSERT_GE(first.gpu, 0) << c.Describe(job).dump(1);

  InjectXid(c, first.node, first.gpu, 48, "Ch 00000010, DBE (0x1)");
  Where moved;
  ASSERT_TRUE(WaitUntil([&] {
    moved = WorkerOf(c, job);
    return moved.state == "RUNNING" && moved.attempt > first.attempt;
  }, absl::Seconds(60))) << c.Describe(job).dump(1);
  EXPECT_FALSE(moved.node == first.node && moved.gpu == first.gpu) << "it left the faulty GPU";
  EXPECT_EQ(moved.last_class, "GPU_ERROR") << c.Describe(job).dump(1);

  // The node views are published apart from the job's, on a later pass of
  // the server's loop: wait for the fault to show.
  CommandResult nodes;
  EXPECT_TRUE(WaitUntil([&] {
    nodes = c.Cli({"nodes"});
    return nodes.out.find(absl::StrCat(first.gpu, " Xid 48")) != std::string::npos;
  }, absl::Seconds(30))) << nodes.out << nodes.err;
  EXPECT_THAT(nodes.out, HasSubstr("✗"));
  CommandResult described;
  EXPECT_TRUE(WaitUntil([&] {
    described = c.Cli({"node", "describe", first.node});
    return described.out.find("faulty: excluded") != std::string::npos;
  }, absl::Seconds(30))) << described.out << described.err;
  EXPECT_THAT(described.out, HasSubstr("Xid 48 (double-bit ECC error)"));
  CommandResult text = c.Cli({"describe", job});
  EXPECT_THAT(text.out, HasSubstr("GPU-error budget unlimited")) << text.out;
  HttpResult m;
  std::string series = absl::StrCat("trainyard_gpu_fault{node=\"", first.node, "\",gpu=\"", first.gpu,
                                    "\",xid=\"48\",action=\"exclude_gpu\"}");
  EXPECT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return MetricSample(m.body, series) == 1.0;
  }, absl::Seconds(20))) << series << "\n" << m.body;

  // The GPU the task runs on now falls off the bus: its whole node drains.
  InjectXid(c, moved.node, moved.gpu, 79, "GPU has fallen off the bus.");
  EXPECT_TRUE(WaitUntil([&] {
    for (const auto& n : c.Nodes().value("nodes", nlohmann::json::array())) {
      if (n["info"].value("name", "") == moved.node) {
        return n["info"].value("state", "") == "DRAINING" && absl::StrContains(n.value("reason", ""), "Xid 79");
      }
    }
    return false;
  }, absl::Seconds(30))) << c.Nodes().dump(1);
  Where again;
  ASSERT_TRUE(WaitUntil([&] {
    again = WorkerOf(c, job);
    return again.state == "RUNNING" && again.attempt > moved.attempt;
  }, absl::Seconds(60))) << c.Describe(job).dump(1);
  EXPECT_NE(again.node, moved.node) << "a drained node keeps no task";
  EXPECT_FALSE(again.node == first.node && again.gpu == first.gpu) << "nor does the faulty GPU";
}

TEST(GpuHealthTest, AnAdminCordonsOneGpuAndNoTaskLandsOnItUntilUncordoned) {
  Cluster c({.nodes = 1, .gpus = 2, .topology = "switches=0-1;sockets=0-1"});
  ASSERT_TRUE(c.WaitNodesReady(1));
  CommandResult r = c.Cli({"cordon", "node-0", "--gpu", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("node node-0: READY (GPUs 1 cordoned)"));
  r = c.Cli({"cordon", "node-0", "--gpu", "5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("gpus: 5 is not a GPU of node node-0 (it has 2: 0-1)"));

  std::string first = c.Submit(kJob);
  ASSERT_TRUE(c.WaitForState(first, "RUNNING")) << c.Describe(first).dump(1);
  EXPECT_EQ(WorkerOf(c, first).gpu, 0);
  std::string spec = kJob;
  spec.replace(spec.find("healthy"), sizeof("healthy") - 1, "waiting");
  std::string second = c.Submit(spec);
  // It waits: the scheduler tried it and says why (no GPU free).
  nlohmann::json waiting;
  ASSERT_TRUE(WaitUntil([&] {
    waiting = c.Describe(second);
    return waiting.value("state", "") == "QUEUED" && !waiting.value("reason", "").empty();
  }, absl::Seconds(20))) << waiting.dump(1);
  EXPECT_THAT(waiting.value("reason", ""), HasSubstr("GPU")) << waiting.dump(1);
  CommandResult nodes = c.Cli({"nodes"});
  EXPECT_THAT(nodes.out, HasSubstr("■⊘")) << nodes.out;
  CommandResult described = c.Cli({"node", "describe", "node-0"});
  EXPECT_THAT(described.out, HasSubstr("cordoned")) << described.out;

  ASSERT_EQ(c.Cli({"uncordon", "node-0", "--gpu", "1"}).exit_code, 0);
  ASSERT_TRUE(c.WaitForState(second, "RUNNING")) << c.Describe(second).dump(1);
  EXPECT_EQ(WorkerOf(c, second).gpu, 1);
}

}  // namespace
}  // namespace trainyard::testing
