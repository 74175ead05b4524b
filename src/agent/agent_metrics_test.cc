// The agent's /metrics: what a scrape shows of hand-made figures (names,
// labels, units, escaping), and of a real agent core running tasks on
// simulated GPUs, through its HTTP endpoint.
#include "agent/agent_metrics.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/test_util.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RecordingListener;
using testing::TempDir;
using testing::TestDataPath;
using testing::kTimeout;

constexpr int64_t kMiB = 1 << 20;

// The value of the sample `series` (name{labels} exactly as exposed).
std::optional<double> Sample(const std::string& metrics, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &v)) return v;
  }
  return std::nullopt;
}

AgentMetricsInput TwoGpus(const std::string& source) {
  AgentMetricsInput in;
  in.node = "node-a";
  in.gpu_source = source;
  in.gpus = {{.index = 0, .memory_used_mb = 1024, .memory_total_mb = 40960, .utilization_percent = 37},
             {.index = 1, .memory_used_mb = 0, .memory_total_mb = 40960}};
  in.supervisor.gpu_milli[0] = 1000;
  in.supervisor.gpu_milli[1] = 250;
  in.supervisor.tasks_by_state[static_cast<int>(TaskState::kRunning)] = 2;
  in.supervisor.log_bytes_written = 4096;
  in.supervisor.task_dirs_reclaimed = 3;
  in.supervisor.task_dirs_reclaimed_bytes = 1 << 20;
  in.supervisor.spawn_seconds.Observe(0.003);
  in.data_dir = DiskSpace{.free_bytes = 1000, .total_bytes = 5000};
  return in;
}

TEST(AgentMetricsTest, RealGpusShowWhatTheDriverSays) {
  std::string m = RenderAgentMetrics(TwoGpus("nvml"));
  EXPECT_EQ(Sample(m, "trainyard_agent_tasks{node=\"node-a\",state=\"RUNNING\"}"), 2.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_tasks{node=\"node-a\",state=\"FAILED\"}"), 0.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_allocated_ratio{node=\"node-a\",gpu=\"0\"}"), 1.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_allocated_ratio{node=\"node-a\",gpu=\"1\"}"), 0.25);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_utilization_ratio{node=\"node-a\",gpu=\"0\"}"), 0.37);
  // The driver said nothing of GPU 1: no sample rather than a made-up one.
  EXPECT_THAT(m, Not(HasSubstr("trainyard_agent_gpu_utilization_ratio{node=\"node-a\",gpu=\"1\"}")));
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_memory_used_bytes{node=\"node-a\",gpu=\"0\"}"), 1024.0 * kMiB);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_memory_used_bytes{node=\"node-a\",gpu=\"1\"}"), 0.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_memory_total_bytes{node=\"node-a\",gpu=\"1\"}"), 40960.0 * kMiB);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpus{node=\"node-a\",source=\"nvml\"}"), 2.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_data_dir_free_bytes{node=\"node-a\"}"), 1000.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_data_dir_size_bytes{node=\"node-a\"}"), 5000.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_log_written_bytes_total{node=\"node-a\"}"), 4096.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_task_dirs_reclaimed_total{node=\"node-a\"}"), 3.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_task_dirs_reclaimed_bytes_total{node=\"node-a\"}"), 1.0 * kMiB);
  EXPECT_EQ(Sample(m, "trainyard_agent_task_spawn_duration_seconds_bucket{node=\"node-a\",le=\"0.005\"}"), 1.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_task_spawn_duration_seconds_bucket{node=\"node-a\",le=\"0.0025\"}"), 0.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_task_spawn_duration_seconds_count{node=\"node-a\"}"), 1.0);
  EXPECT_THAT(m, HasSubstr("# TYPE trainyard_agent_log_written_bytes_total counter\n"));
  EXPECT_THAT(m, HasSubstr("# TYPE trainyard_agent_task_spawn_duration_seconds histogram\n"));
}

TEST(AgentMetricsTest, SimulatedGpusAreAsBusyAsTheirAllocatedShare) {
  std::string m = RenderAgentMetrics(TwoGpus("simulated"));
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_utilization_ratio{node=\"node-a\",gpu=\"0\"}"), 1.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_utilization_ratio{node=\"node-a\",gpu=\"1\"}"), 0.25);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_memory_used_bytes{node=\"node-a\",gpu=\"0\"}"), 40960.0 * kMiB);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_memory_used_bytes{node=\"node-a\",gpu=\"1\"}"), 10240.0 * kMiB);
}

TEST(AgentMetricsTest, LabelValuesAreEscapedAndAnUnknownDiskIsLeftOut) {
  AgentMetricsInput in = TwoGpus("simulated");
  in.node = "we\"ird\\na\nme";
  in.data_dir.reset();
  in.http_requests = {{.method = "GET", .route = "/metrics", .code = 200, .count = 3}};
  std::string m = RenderAgentMetrics(in);
  EXPECT_THAT(m, HasSubstr("trainyard_agent_gpus{node=\"we\\\"ird\\\\na\\nme\",source=\"simulated\"} 2\n"));
  EXPECT_THAT(m, Not(HasSubstr("trainyard_agent_data_dir_free_bytes{")));
  EXPECT_EQ(Sample(m, "trainyard_agent_http_requests_total{node=\"we\\\"ird\\\\na\\nme\",method=\"GET\",route=\"/"
                      "metrics\",code=\"200\"}"),
            3.0);
}

class AgentMetricsCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = std::make_unique<SimulatedGpuDiscovery>(*core::GpuTopology::FromSpec("switches=0-1,2-3"), 40960);
    config_.node_name = "node-m";
    config_.data_dir = dir_.path() + "/data";
    config_.clock = &clock_;
    config_.proc_root = TestDataPath("proc");
    config_.limiter = limiter_.get();
    config_.task_users.map = *TaskUserMap::Parse(absl::StrCat("\"*\": ", getuid()), "test map");
    config_.task_users.allow_root = true;
    auto agent = AgentCore::Start(config_, &listener_, std::move(sim));
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
  }
  void TearDown() override {
    if (!agent_) return;
    agent_->supervisor().KillAll();
    for (const TaskStatus& s : agent_->supervisor().Snapshot()) {
      agent_->supervisor().WaitFor(s.key, [](const TaskStatus& t) { return IsFinal(t.state); }, kTimeout);
    }
  }
  TaskLaunch Task(const std::string& role, const std::string& script, core::GpuSet gpus, int32_t milli = 0) {
    TaskLaunch l;
    l.key = {.job = absl::StrCat("t", getpid(), "-metrics"), .role = role};
    l.command = {"sh", "-c", script};
    l.gpus = gpus;
    l.gpu_milli = milli;
    return l;
  }

  TempDir dir_;
  RealClock clock_;
  RecordingListener listener_;
  ResourceLimiterPtr limiter_ = NewUnconfinedLimiter();
  AgentConfig config_;
  std::unique_ptr<AgentCore> agent_;
};

TEST_F(AgentMetricsCoreTest, AScrapeShowsRunningTasksTheirGpusAndTheirLogs) {
  TaskLaunch whole = Task("worker", "echo hello; exec sleep 30", core::GpuSet(0b0110));
  TaskLaunch share = Task("share", "exec sleep 30", core::GpuSet(0b1000), 500);
  TaskLaunch done = Task("done", "echo 0123456789", core::GpuSet());
  for (const TaskLaunch& l : {whole, share, done}) ASSERT_TRUE(agent_->Launch(l).ok()) << l.key.ToString();
  for (const TaskLaunch& l : {whole, share}) {
    ASSERT_TRUE(agent_->supervisor().WaitFor(l.key, [](const TaskStatus& s) { return s.pid > 0; }, kTimeout));
  }
  ASSERT_TRUE(agent_->supervisor().WaitFor(done.key, [](const TaskStatus& s) { return IsFinal(s.state); }, kTimeout));

  auto http = ServeAgentMetrics("0", agent_.get());  // a bare port: loopback
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_TRUE(absl::StartsWith((*http)->address(), "127.0.0.1:")) << (*http)->address();
  httplib::Client client("http://" + (*http)->address());
  std::string m;
  // The running task's line reaches its log through its keeper: wait for it.
  ASSERT_TRUE(testing::WaitUntil([&] {
    auto r = client.Get("/metrics");
    if (!r || r->status != 200) return false;
    m = r->body;
    return Sample(m, "trainyard_agent_log_written_bytes_total{node=\"node-m\"}").value_or(0) >= 2 * 20 + 17;
  }, kTimeout)) << m;
  EXPECT_EQ(Sample(m, "trainyard_agent_tasks{node=\"node-m\",state=\"RUNNING\"}"), 2.0) << m;
  EXPECT_EQ(Sample(m, "trainyard_agent_tasks{node=\"node-m\",state=\"SUCCEEDED\"}"), 1.0) << m;
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_allocated_ratio{node=\"node-m\",gpu=\"0\"}"), 0.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_allocated_ratio{node=\"node-m\",gpu=\"1\"}"), 1.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_allocated_ratio{node=\"node-m\",gpu=\"2\"}"), 1.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_allocated_ratio{node=\"node-m\",gpu=\"3\"}"), 0.5);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpu_utilization_ratio{node=\"node-m\",gpu=\"3\"}"), 0.5);
  EXPECT_EQ(Sample(m, "trainyard_agent_gpus{node=\"node-m\",source=\"simulated\"}"), 4.0);
  EXPECT_EQ(Sample(m, "trainyard_agent_task_spawn_duration_seconds_count{node=\"node-m\"}"), 3.0);
  EXPECT_GT(Sample(m, "trainyard_agent_data_dir_size_bytes{node=\"node-m\"}").value_or(0), 0.0);
  EXPECT_GT(Sample(m, "trainyard_agent_data_dir_free_bytes{node=\"node-m\"}").value_or(0), 0.0);
  // A request is counted once its answer is written, so the next scrape may
  // come first: scrape until it shows the first one (with a deadline).
  httplib::Result again{nullptr, httplib::Error::Unknown};
  const std::string counted =
      "trainyard_agent_http_requests_total{node=\"node-m\",method=\"GET\",route=\"/metrics\",code=\"200\"}";
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(10))) {
    again = client.Get("/metrics");
    if (again && Sample(again->body, counted).value_or(0) >= 1.0) break;
  }
  ASSERT_TRUE(again);
  EXPECT_GE(Sample(again->body, counted).value_or(0), 1.0);
  EXPECT_EQ(again->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(AgentMetricsServeTest, ABadListenAddressNamesTheFlag) {
  TempDir dir;
  auto bad = ServeAgentMetrics("nowhere", nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("http-listen: 'nowhere' is not host:port"));
}

}  // namespace
}  // namespace trainyard::agent
