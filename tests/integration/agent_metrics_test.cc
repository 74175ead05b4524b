// An agent's own /metrics and the job masters' figures on the server's, as
// monitoring sees them on real processes: an agent serving --http-listen
// shows a running task and the GPUs it holds (and promtool accepts what it
// serves); a job master's workers, connections and barriers appear, summed,
// on the server's /metrics while its job runs; and a made-up summary
// without the job's credential is refused.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kTwoGpus[] = R"(name: pair
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 2}
    command: [sh, -c, 'echo started; exec sleep 300']
)";

// The sum of every sample of `name` whose labels hold `label` (name{...}).
double SumOf(const std::string& metrics, const std::string& name, const std::string& label) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, name + "{") || !absl::StrContains(line, label)) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

// The host:port an agent logged for its /metrics ("" when not yet).
std::string AgentMetricsAddress(Process& agent) {
  std::string log = ReadFile(agent.log());
  const std::string marker = "/metrics on http://";
  size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  size_t start = at + marker.size();
  size_t end = log.find('/', start);
  return end == std::string::npos ? "" : log.substr(start, end - start);
}

TEST(AgentMetricsTest, AnAgentShowsItsRunningTaskAndItsGpusAndPromtoolAcceptsIt) {
  std::string promtool = ProgramOnPath("promtool");
  ASSERT_FALSE(promtool.empty()) << "promtool is not installed (Debian's prometheus package; run scripts/setup)";
  Cluster c({.nodes = 2, .agent_flags = {"--http-listen", "0"}});
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(kTwoGpus);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  std::string node;
  nlohmann::json described = c.Describe(job);  // kept: a range over a part of a temporary would dangle
  for (const auto& t : described["tasks"]) {
    if (t["role"] == "worker") node = t["node"];
  }
  ASSERT_FALSE(node.empty());
  int placed = node == "node-0" ? 0 : 1;
  std::string here = AgentMetricsAddress(c.agent(placed));
  std::string there = AgentMetricsAddress(c.agent(1 - placed));
  ASSERT_TRUE(absl::StartsWith(here, "127.0.0.1:")) << "a bare port is on loopback: " << here;
  ASSERT_FALSE(there.empty()) << ReadFile(c.agent(1 - placed).log());

  HttpResult m;
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(here, "/metrics");
    return MetricSample(m.body, "trainyard_agent_tasks{node=\"" + node + "\",state=\"RUNNING\"}") >= 1.0 &&
           MetricSample(m.body, "trainyard_agent_log_written_bytes_total{node=\"" + node + "\"}").value_or(0) > 0;
  }, absl::Seconds(20))) << m.body;
  EXPECT_EQ(m.status, 200);
  // The worker's 2 GPUs, whole, busy as simulated GPUs are: by their share.
  EXPECT_EQ(SumOf(m.body, "trainyard_agent_gpu_allocated_ratio", "node=\"" + node + "\""), 2.0) << m.body;
  EXPECT_EQ(SumOf(m.body, "trainyard_agent_gpu_utilization_ratio", "node=\"" + node + "\""), 2.0) << m.body;
  EXPECT_EQ(MetricSample(m.body, "trainyard_agent_gpus{node=\"" + node + "\",source=\"simulated\"}"), 8.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_agent_task_spawn_duration_seconds_count{node=\"" + node + "\"}").value_or(0), 1);
  EXPECT_GT(MetricSample(m.body, "trainyard_agent_data_dir_free_bytes{node=\"" + node + "\"}").value_or(0), 0);
  std::string other = node == "node-0" ? "node-1" : "node-0";
  HttpResult idle = HttpGet(there, "/metrics");
  EXPECT_EQ(SumOf(idle.body, "trainyard_agent_gpu_allocated_ratio", "node=\"" + other + "\""), 0.0) << idle.body;
  EXPECT_EQ(MetricSample(idle.body, "trainyard_agent_gpu_allocated_ratio{node=\"" + other + "\",gpu=\"7\"}"), 0.0);

  std::string file = c.dir() + "/agent-metrics.txt";
  WriteFile(file, m.body);
  std::string out = c.dir() + "/promtool.out";
  int status = std::system(absl::StrCat("'", promtool, "' check metrics < '", file, "' > '", out, "' 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(out);
  EXPECT_EQ(ReadFile(out), "") << "promtool's findings";
}

// Workers that tell their master they run, pass one barrier, and wait for
// `out`/end before they complete.
std::string MasterSpec(const std::string& out) {
  std::string bin = TrainyardBin();
  std::string script = absl::StrCat(bin, " worker state RUNNING && ", bin, " worker barrier --timeout 40 && touch ",
                                    out, "/passed-$TRAINYARD_INDEX && while [ ! -e ", out,
                                    "/end ]; do sleep 0.05; done; ", bin, " worker state COMPLETED");
  return absl::StrCat(R"(
name: figures
replicas:
  worker:
    count: 2
    command: [sh, -c, ')", script, R"(']
)");
}

TEST(JobMasterMetricsTest, TheMastersFiguresAppearSummedOnTheServerWhileItsJobRuns) {
  Cluster c({.nodes = 1});
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(MasterSpec(out));
  ASSERT_FALSE(job.empty());
  HttpResult m;
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return MetricSample(m.body, "trainyard_jobmasters_reporting") == 1.0 &&
           MetricSample(m.body, "trainyard_jobmaster_workers{state=\"RUNNING\"}") == 2.0 &&
           MetricSample(m.body, "trainyard_jobmaster_barrier_duration_seconds_count") == 1.0;
  }, absl::Seconds(40), absl::Milliseconds(200))) << m.body << "\n" << c.Describe(job).dump(2);
  EXPECT_EQ(MetricSample(m.body, "trainyard_jobmaster_workers{state=\"ERROR\"}"), 0.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_jobmaster_connections").value_or(-1), 0.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_grpc_requests_total{method=\"ReportJobMasterSummary\",code=\"OK\"}").value_or(0),
            1.0);
  EXPECT_THAT(m.body, ::testing::Not(HasSubstr(job + "\"")));  // no per-job series

  // Its end: the final summary takes it out of the masters reporting, its
  // barrier stays in the histogram.
  WriteFile(out + "/end", "");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return MetricSample(m.body, "trainyard_jobmasters_reporting") == 0.0;
  }, absl::Seconds(20), absl::Milliseconds(200))) << m.body;
  EXPECT_EQ(MetricSample(m.body, "trainyard_jobmaster_barrier_duration_seconds_count"), 1.0);
  EXPECT_EQ(MetricSample(m.body, "trainyard_jobmaster_workers{state=\"RUNNING\"}"), 0.0);
}

grpc::Status SendSummary(const Cluster& c, const std::string& job,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(c.address(), ClientCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  v1::JobMasterSummary s;
  s.set_job(job);
  for (int n : {0, 0, 500, 0, 0}) s.add_workers_by_state(n);
  s.set_connections(1000);
  v1::JobMasterSummaryResponse resp;
  return stub->ReportJobMasterSummary(&ctx, s, &resp);
}

TEST(JobMasterMetricsTest, AMadeUpSummaryWithoutTheJobsCredentialIsRefused) {
  Cluster c({.nodes = 1});
  std::string job = c.Submit(kTwoGpus);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  std::string mallory = c.UserToken("mallory");
  ASSERT_FALSE(mallory.empty());

  grpc::Status none = SendSummary(c, job, {});
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  grpc::Status forged = SendSummary(c, job, {{"trainyard-job-token", std::string(64, 'a')}});
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED) << forged.error_message();
  EXPECT_THAT(forged.error_message(), HasSubstr("the job credential is not job " + job + "'s"));
  grpc::Status user = SendSummary(c, job, {{"authorization", "Bearer " + mallory}});
  EXPECT_EQ(user.error_code(), grpc::StatusCode::PERMISSION_DENIED) << user.error_message();
  grpc::Status unknown = SendSummary(c, "no-such-job", {{"trainyard-job-token", std::string(64, 'a')}});
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();

  HttpResult m = HttpGet(c.http_address(), "/metrics");
  EXPECT_LT(MetricSample(m.body, "trainyard_jobmaster_workers{state=\"RUNNING\"}").value_or(0), 500.0) << m.body;
  EXPECT_LT(MetricSample(m.body, "trainyard_jobmaster_connections").value_or(0), 1000.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_grpc_requests_total{method=\"ReportJobMasterSummary\",code=\"PERMISSION_DENIED\"}")
                .value_or(0),
            2.0);
}

}  // namespace
}  // namespace trainyard::testing
