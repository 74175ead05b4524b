// AgentCore: registration info from simulated GPUs and recorded /proc files,
// heartbeats with ownerless GPUs and task states, launch checks, and a task
// run end to end through the facade.
#include "agent/agent_core.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/test_util.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::RecordingListener;
using testing::TempDir;
using testing::TestDataPath;
using testing::kTimeout;

class AgentCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = std::make_unique<SimulatedGpuDiscovery>(
        *core::GpuTopology::FromSpec("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7"), 40960);
    sim_ = sim.get();
    config_.node_name = "node-a";
    config_.rack = "r1";
    config_.labels = {{"zone", "east"}};
    config_.data_dir = dir_.path() + "/data";
    config_.clock = &clock_;
    config_.proc_root = TestDataPath("proc");
    config_.ownerless = {.enable = true, .not_ready_memory_threshold_mb = 100};
    config_.limiter = limiter_.get();
    // Tasks run as whoever runs the test (root included), as under `trainyard up`.
    config_.task_users.map = *TaskUserMap::Parse(absl::StrCat("\"*\": ", getuid()), "test map");
    config_.task_users.allow_root = true;
    ASSERT_TRUE(sim_->SetMemoryUsed(6, 5000).ok());  // someone else's job
    auto agent = AgentCore::Start(config_, &listener_, std::move(sim));
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
  }
  void TearDown() override {
    agent_->supervisor().KillAll();
    for (const TaskStatus& s : agent_->supervisor().Snapshot()) {
      agent_->supervisor().WaitFor(s.key, [](const TaskStatus& t) { return IsFinal(t.state); }, kTimeout);
    }
  }
  TaskLaunch Task(const std::string& role, const std::string& script, core::GpuSet gpus) {
    TaskLaunch l;
    l.key = {.job = absl::StrCat("t", getpid(), "-core"), .role = role};
    l.command = {"sh", "-c", script};
    l.gpus = gpus;
    return l;
  }

  TempDir dir_;
  FakeClock clock_;
  RecordingListener listener_;
  ResourceLimiterPtr limiter_ = NewUnconfinedLimiter();
  SimulatedGpuDiscovery* sim_ = nullptr;
  AgentConfig config_;
  std::unique_ptr<AgentCore> agent_;
};

TEST_F(AgentCoreTest, NodeInfoForRegistration) {
  const NodeInfo& node = agent_->node_info();
  EXPECT_EQ(node.name, "node-a");
  EXPECT_EQ(node.address, "node-a");
  EXPECT_EQ(node.rack, "r1");
  EXPECT_EQ(node.labels.at("zone"), "east");
  EXPECT_EQ(node.memory_mb, 263856044 / 1024);  // recorded meminfo
  EXPECT_GE(node.vcores_milli, 1000);
  EXPECT_EQ(node.gpus.size(), 8u);
  EXPECT_EQ(node.gpu_source, "simulated");
  EXPECT_EQ(node.topology.switches().size(), 4u);
  EXPECT_TRUE(node.port_range.Empty()) << "none configured: the server decides";
  EXPECT_EQ(node.ephemeral_ports.ToString(), "32768-60999");
  EXPECT_EQ(node.excluded_gpus, core::GpuSet(1 << 6));
  EXPECT_EQ(node.limiter, LimiterKind::kNone);
}

TEST_F(AgentCoreTest, HeartbeatReportsGpuUsePortsAndTasks) {
  TaskLaunch l = Task("worker", "exec sleep 30", core::GpuSet(0b11));
  ASSERT_TRUE(agent_->Launch(l).ok());
  ASSERT_TRUE(agent_->supervisor().WaitFor(l.key, [](const TaskStatus& s) { return s.pid > 0; }, kTimeout));
  // Our task's GPU fills up: that is not ownerless. GPU 6 frees up.
  ASSERT_TRUE(sim_->SetMemoryUsed(0, 30000).ok());
  ASSERT_TRUE(sim_->SetMemoryUsed(6, 0).ok());
  absl::StatusOr<HeartbeatSnapshot> hb = agent_->Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->gpus[0].memory_used_mb, 30000);
  EXPECT_EQ(hb->gpus_in_use, core::GpuSet(0b11));
  EXPECT_TRUE(hb->excluded_gpus.Empty());
  EXPECT_TRUE(hb->ports_in_use.Contains(8080));  // recorded /proc/net/tcp
  ASSERT_EQ(hb->tasks.size(), 1u);
  EXPECT_EQ(hb->tasks[0].state, TaskState::kRunning);
}

TEST_F(AgentCoreTest, LaunchChecksGpus) {
  EXPECT_THAT(agent_->Launch(Task("a", "true", core::GpuSet(1 << 9))).message(),
              HasSubstr("GPUs 9 do not exist on node node-a (8 GPUs)"));
  ASSERT_TRUE(agent_->Launch(Task("a", "exec sleep 30", core::GpuSet(0b110))).ok());
  absl::Status taken = agent_->Launch(Task("b", "true", core::GpuSet(0b100)));
  EXPECT_EQ(taken.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(taken.message(), HasSubstr("GPUs 2 are held by another task"));
}

TEST_F(AgentCoreTest, SharesOfOneGpuSitTogetherUpToTheWholeGpu) {
  auto share = [&](const std::string& role, int32_t milli, core::GpuSet gpus) {
    TaskLaunch l = Task(role, "exec sleep 30", gpus);
    l.gpu_milli = milli;
    return agent_->Launch(l);
  };
  for (const char* role : {"q0", "q1", "q2"}) ASSERT_TRUE(share(role, 250, core::GpuSet(0b1000)).ok()) << role;
  absl::Status over = share("half", 500, core::GpuSet(0b1000));
  EXPECT_EQ(over.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(over.message(), HasSubstr("GPU 3 has 250 thousandths left, the share needs 500"));
  EXPECT_TRUE(share("q3", 250, core::GpuSet(0b1000)).ok());
  // A whole GPU never joins shares, and a share never joins a whole GPU.
  EXPECT_THAT(agent_->Launch(Task("whole", "true", core::GpuSet(0b1000))).message(),
              HasSubstr("GPUs 3 are held by another task"));
  ASSERT_TRUE(agent_->Launch(Task("whole", "exec sleep 30", core::GpuSet(0b10000))).ok());
  EXPECT_THAT(share("q4", 250, core::GpuSet(0b10000)).message(), HasSubstr("GPUs 4 are held by another task"));
  EXPECT_EQ(agent_->supervisor().GpusInUse(), core::GpuSet(0b11000));
}

TEST_F(AgentCoreTest, RunsTaskAndKeepsItsLogs) {
  TaskLaunch l = Task("worker", "echo cuda=$CUDA_VISIBLE_DEVICES", core::GpuSet(0b10100));
  ASSERT_TRUE(agent_->Launch(l).ok());
  std::optional<TaskStatus> s =
      agent_->supervisor().WaitFor(l.key, [](const TaskStatus& t) { return IsFinal(t.state); }, kTimeout);
  ASSERT_EQ(s->state, TaskState::kSucceeded);
  EXPECT_EQ(testing::Unstamped(agent_->logs().Read(l.key, {})->data), "cuda=2,4\n");
  EXPECT_EQ(listener_.StatesOf(l.key).back(), TaskState::kSucceeded);
}

TEST(AgentCoreConfigTest, BadConfigNamesTheField) {
  TempDir dir;
  RecordingListener listener;
  AgentConfig config;
  EXPECT_THAT(AgentCore::Start(config, &listener).status().message(), HasSubstr("data_dir: must be set"));
  config.data_dir = dir.path();
  EXPECT_THAT(AgentCore::Start(config, &listener).status().message(), HasSubstr("clock: must be set"));
  FakeClock clock;
  config.clock = &clock;
  config.port_range = "70000";
  EXPECT_THAT(AgentCore::Start(config, &listener).status().message(), HasSubstr("port_range: "));
  config.port_range = "";
  config.proc_root = dir.path();  // no meminfo there
  EXPECT_THAT(AgentCore::Start(config, &listener).status().message(), HasSubstr("set memory_mb in the config"));
  config.memory_mb = 1024;
  config.gpu.simulate_gpus = 4;
  config.gpu.gpu_topology = "switches=0-9";
  EXPECT_THAT(AgentCore::Start(config, &listener).status().message(), HasSubstr("--gpu-topology"));
}

}  // namespace
}  // namespace trainyard::agent
