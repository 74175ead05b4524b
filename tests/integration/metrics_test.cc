// The server's /metrics as monitoring sees it: valid for Prometheus' own
// checker (promtool), values that match what the cluster shows, and a real
// Prometheus scraping a `trainyard up` cluster (the server and every agent,
// from the targets file up writes) and answering queries with the GPUs that
// `trainyard nodes` shows allocated.
#include <sys/wait.h>

#include <bit>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kMetricsTwoGpus[] = R"(name: pair
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 2}
    command: [sleep, '300']
)";

// `s` with every byte but [A-Za-z0-9-_.~] percent-encoded.
std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += absl::StrFormat("%%%02X", ch);
    }
  }
  return out;
}

// The trainyard_* metric names a PromQL expression reads.
std::vector<std::string> MetricNames(const std::string& expr) {
  std::vector<std::string> names;
  for (size_t at = expr.find("trainyard_"); at != std::string::npos; at = expr.find("trainyard_", at + 1)) {
    size_t end = at;
    while (end < expr.size() && (std::islower(static_cast<unsigned char>(expr[end])) || expr[end] == '_')) ++end;
    names.push_back(expr.substr(at, end - at));
    at = end - 1;
  }
  return names;
}

TEST(MetricsTest, PromtoolAcceptsTheMetricsOfARunningCluster) {
  std::string promtool = ProgramOnPath("promtool");
  ASSERT_FALSE(promtool.empty()) << "promtool is not installed (Debian's prometheus package; run scripts/setup)";
  Cluster c({.nodes = 2});
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(kMetricsTwoGpus);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  std::string node;
  nlohmann::json described = c.Describe(job);
  for (const auto& t : described["tasks"]) {
    if (t["role"] == "worker") node = t["node"];
  }
  // The node views are published every few ms: wait for the placed GPUs.
  HttpResult m;
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return MetricSample(m.body, "trainyard_node_gpus_allocated{node=\"" + node + "\"}") == 2.0;
  }, absl::Seconds(10))) << m.body;
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(MetricSample(m.body, "trainyard_gpus{state=\"allocated\"}"), 2.0);
  EXPECT_EQ(MetricSample(m.body, "trainyard_gpus{state=\"free\"}"), 14.0);
  EXPECT_EQ(MetricSample(m.body, "trainyard_jobs{queue=\"default\",state=\"RUNNING\"}"), 1.0);
  EXPECT_EQ(MetricSample(m.body, "trainyard_nodes{state=\"READY\"}"), 2.0);
  EXPECT_EQ(MetricSample(m.body, "trainyard_agents_connected"), 2.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_jobs_submitted_total").value_or(0), 1.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_placements_total").value_or(0), 1.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_job_pending_duration_seconds_count").value_or(0), 1.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_store_commit_duration_seconds_count").value_or(0), 1.0);
  EXPECT_GE(MetricSample(m.body, "trainyard_grpc_requests_total{method=\"Submit\",code=\"OK\"}").value_or(0), 1.0);
  // A request is counted once answered (after its answer is written): a
  // later scrape, on another connection, may be served before that.
  HttpResult again;
  EXPECT_TRUE(WaitUntil([&] {
    again = HttpGet(c.http_address(), "/metrics");
    return MetricSample(again.body, "trainyard_http_requests_total{method=\"GET\",route=\"/metrics\",code=\"200\"}")
               .value_or(0) >= 1.0;
  }, absl::Seconds(10))) << again.body;

  std::string file = c.dir() + "/metrics.txt";
  WriteFile(file, m.body);
  std::string out = c.dir() + "/promtool.out";
  int status = std::system(absl::StrCat("'", promtool, "' check metrics < '", file, "' > '", out, "' 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(out);
  EXPECT_EQ(ReadFile(out), "") << "promtool's findings";
}

// GPUs allocated per node as `trainyard nodes` shows them, for a cluster
// that `trainyard up` started in `data_dir`.
std::map<std::string, int> AllocatedByCli(const std::string& address, const std::string& data_dir) {
  std::map<std::string, int> out;
  CommandResult r = RunCli({"nodes", "-o", "json", "--server", address}, absl::Seconds(30), UpClientEnv(data_dir));
  if (r.exit_code != 0) return out;
  nlohmann::json nodes = nlohmann::json::parse(r.out, nullptr, false);
  if (nodes.is_discarded()) return out;
  for (const auto& n : nodes["nodes"]) {
    int count = n["info"]["topology"]["gpu_count"];
    uint64_t all = count >= 64 ? ~0ull : ((1ull << count) - 1);
    uint64_t free = n.value("free_gpu_mask", uint64_t{0});
    out[n["info"]["name"]] = std::popcount(all & ~free);
  }
  return out;
}

// The value per node of an instant query's answer (a vector by `node`).
std::map<std::string, int> ByNode(const HttpResult& q) {
  std::map<std::string, int> out;
  if (q.status != 200 || q.json.is_discarded()) return out;
  for (const auto& r : q.json["data"]["result"]) {
    out[r["metric"].value("node", "")] = static_cast<int>(std::stod(r["value"][1].get<std::string>()));
  }
  return out;
}

// A real Prometheus pointed at the targets file `trainyard up` writes
// scrapes the server and every agent: the GPUs a placed task holds are on
// the node the CLI shows, by the server's count and by the agents' own, and
// zero on the other; every query of the example Grafana dashboard is one it
// evaluates, over metrics that are served.
TEST(MetricsTest, PrometheusScrapesTheClusterAndFindsTheGpusItShows) {
  std::string prometheus = ProgramOnPath("prometheus");
  ASSERT_FALSE(prometheus.empty()) << "prometheus is not installed (Debian's prometheus package; run scripts/setup)";
  TempDir dir;
  std::string data = dir.path() + "/cluster";
  std::string address = absl::StrCat("127.0.0.1:", FreePortPair());
  Process up({TrainyardBin(), "up", "--nodes", "2", "--gpus-per-node", "8", "--port",
              address.substr(address.rfind(':') + 1), "--data-dir", data},
             dir.path() + "/up.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(up.log()).find("Press Ctrl-C") != std::string::npos || !up.Running(); },
                      absl::Seconds(40), absl::Milliseconds(50)))
      << ReadFile(up.log());
  ASSERT_TRUE(up.Running()) << ReadFile(up.log());
  EXPECT_THAT(ReadFile(up.log()), HasSubstr("Prometheus targets: " + data + "/prometheus-targets.json"));
  nlohmann::json targets = nlohmann::json::parse(ReadFile(data + "/prometheus-targets.json"), nullptr, false);
  ASSERT_FALSE(targets.is_discarded()) << ReadFile(data + "/prometheus-targets.json");
  std::vector<std::string> endpoints;  // every target, the server first
  for (const auto& group : targets) {
    for (const auto& t : group["targets"]) endpoints.push_back(t);
  }
  ASSERT_EQ(endpoints.size(), 3u) << targets.dump(2);
  EXPECT_EQ(targets[0]["labels"]["component"], "server");
  EXPECT_EQ(targets[1]["labels"]["component"], "agent");
  WriteFile(dir.path() + "/pair.yaml", kMetricsTwoGpus);
  CommandResult submitted = RunCli({"submit", dir.path() + "/pair.yaml", "--server", address}, absl::Seconds(30),
                                   UpClientEnv(data));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;

  TempDir prom;
  WriteFile(prom.path() + "/prometheus.yml", absl::StrCat(R"(global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: trainyard
    file_sd_configs:
      - files: [')", data, R"(/prometheus-targets.json']
        refresh_interval: 1s
)"));
  std::string web = absl::StrCat("127.0.0.1:", FreePort());
  Process p({prometheus, "--config.file=" + prom.path() + "/prometheus.yml",
             "--storage.tsdb.path=" + prom.path() + "/data", "--web.listen-address=" + web},
            prom.path() + "/prometheus.log");

  // What the cluster shows: the CLI's GPU bitmap of each node (the node
  // views are published a few ms after the job's).
  std::map<std::string, int> cli;
  int placed = 0;
  ASSERT_TRUE(WaitUntil([&] {
    cli = AllocatedByCli(address, data);
    placed = 0;
    for (const auto& [node, n] : cli) placed += n;
    return placed == 2;
  }, absl::Seconds(20), absl::Milliseconds(100))) << placed;
  ASSERT_EQ(cli.size(), 2u);
  // What Prometheus has scraped, through its query API: the server's count
  // per node, and the agents' own (the sum of each node's GPUs' shares).
  HttpResult server_view, agent_view;
  ASSERT_TRUE(WaitUntil([&] {
    server_view = HttpGet(web, "/api/v1/query?query=trainyard_node_gpus_allocated");
    agent_view = HttpGet(web, "/api/v1/query?query=" + UrlEncode("sum by (node) (trainyard_agent_gpu_allocated_ratio)"));
    return ByNode(server_view) == cli && ByNode(agent_view) == cli;
  }, absl::Seconds(60), absl::Milliseconds(250)))
      << server_view.body << "\n" << agent_view.body << "\n" << ReadFile(prom.path() + "/prometheus.log");
  int zeros = 0;
  for (const auto& [node, n] : ByNode(agent_view)) zeros += n == 0;
  EXPECT_EQ(zeros, 1) << "the node without the task shows none of its GPUs allocated: " << agent_view.body;
  HttpResult up_targets = HttpGet(web, "/api/v1/query?query=" + UrlEncode("sum(up{job=\"trainyard\"})"));
  ASSERT_EQ(up_targets.status, 200) << up_targets.body;
  EXPECT_EQ(up_targets.json["data"]["result"][0]["value"][1], "3") << up_targets.body;
  HttpResult sum = HttpGet(web, "/api/v1/query?query=sum(trainyard_gpus%7Bstate%3D%22allocated%22%7D)");
  ASSERT_EQ(sum.status, 200) << sum.body;
  EXPECT_EQ(sum.json["data"]["result"][0]["value"][1], "2") << sum.body;

  // The example Grafana dashboard (docs/grafana/trainyard.json): every
  // query is one this Prometheus evaluates, and every metric it names is
  // one the server or an agent serves.
  const char* src = std::getenv("TRAINYARD_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  nlohmann::json dash = nlohmann::json::parse(ReadFile(absl::StrCat(src, "/docs/grafana/trainyard.json")));
  std::string served;
  for (const std::string& e : endpoints) absl::StrAppend(&served, "\n", HttpGet(e, "/metrics").body);
  int queries = 0;
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel["targets"]) {
      std::string expr = target["expr"];
      ++queries;
      HttpResult r = HttpGet(web, "/api/v1/query?query=" + UrlEncode(expr));
      EXPECT_EQ(r.status, 200) << panel["title"] << ": " << expr << "\n" << r.body;
      for (const std::string& name : MetricNames(expr)) {
        EXPECT_THAT(served, HasSubstr("\n" + name)) << panel["title"] << ": " << name << " is not served";
      }
    }
  }
  EXPECT_GE(queries, 41);
  p.Stop();
  up.Stop();
}

}  // namespace
}  // namespace trainyard::testing
