// The server's HTTP API at cluster scale: /metrics of a 10,000-node cluster
// (8 GPUs each, half of them allocated; 20,000 live jobs), rendered from
// published views as the server does, and served whole over a real socket
// by the HTTP server (cpp-httplib) to a client in this process. Targets:
// served in < 50 ms, < 2 MB. Also GET /api/v1/nodes of the same cluster:
// whole (as old clients read it), a page of 100 (the first, one from the
// middle by its cursor, and one filtered by label, model and free GPUs;
// target < 50 ms), and GET /api/v1/node-summary (the dashboard's heat map).
// A plain main() that prints a table; Google Benchmark flags are ignored.
//   build/<dir>/bench/http_bench [--nodes=N] [--samples=N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "server/http/metrics.h"
#include "server/http/node_routes.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

class ViewsOnly final : public RestBackend {
 public:
  ViewStore views;
  const ViewStore& Views() override { return views; }
  void Submit(const Principal&, const v1::SubmitRequest&, SubmitDone done) override { done(absl::UnimplementedError("bench")); }
  absl::StatusOr<v1::JobState> Kill(const Principal&, const std::string&, const std::string&) override {
    return absl::UnimplementedError("bench");
  }
  absl::StatusOr<v1::JobView> Describe(const std::string&) override { return absl::UnimplementedError("bench"); }
};

// `nodes` nodes of 8 GPUs on 4 switches and 2 sockets; even nodes have 4
// GPUs held by two live 2-GPU jobs.
void Fill(ViewStore& views, int nodes) {
  auto list = std::make_shared<std::vector<ViewStore::NodeEntry>>();
  int job = 0;
  for (int i = 0; i < nodes; ++i) {
    auto n = std::make_shared<v1::NodeView>();
    v1::NodeInfo* info = n->mutable_info();
    info->set_name(absl::StrFormat("node-%05d", i));
    info->set_state(v1::NODE_READY);
    info->set_rack(absl::StrCat("rack-", i / 40));
    (*info->mutable_labels())["gpu"] = "a100";
    info->set_gpu_model(i % 4 == 0 ? "H100" : "A100");
    v1::GpuTopology* t = info->mutable_topology();
    t->set_gpu_count(8);
    for (uint64_t s : {0x3ull, 0xcull, 0x30ull, 0xc0ull}) t->add_switches(s);
    for (uint64_t s : {0xfull, 0xf0ull}) t->add_sockets(s);
    n->set_free_gpu_mask(i % 2 == 0 ? 0xf0 : 0xff);
    if (i % 2 == 0) {
      for (uint64_t mask : {0x3ull, 0xcull}) {
        auto v = std::make_shared<v1::JobView>();
        v->set_name(absl::StrCat("job-", job));
        v->set_id(++job);
        v->set_queue(absl::StrCat("q", job % 4));
        v->set_user(absl::StrCat("user", job % 50));
        v->set_state(v1::JOB_RUNNING);
        v1::TaskView* task = v->add_tasks();
        task->set_name(absl::StrCat(v->name(), "-worker-0"));
        task->set_node(info->name());
        task->set_gpu_mask(mask);
        task->set_state(v1::TASK_RUNNING);
        ViewStore::JobEntry e;
        e.view = v;
        views.PutJob(v->name(), e);
      }
    }
    list->push_back(ViewStore::NodeEntry{n, absl::ToUnixMillis(absl::Now())});
  }
  views.PutNodes(list);
  auto queues = std::make_shared<v1::ListQueuesResponse>();
  for (int q = 0; q < 4; ++q) {
    v1::QueueView* v = queues->add_queues();
    v->set_name(absl::StrCat("q", q));
    v->set_capacity_percent(25);
    v->mutable_used()->set_gpus(nodes);
  }
  queues->mutable_cluster()->set_gpus(8 * nodes);
  views.PutQueues(queues);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void Row(const char* what, const std::string& value, const char* target) {
  printf("  %-44s %-22s %s\n", what, value.c_str(), target);
}

// Milliseconds of each of `samples` GET `path` (whole body read), and its size.
// Each request with Cache-Control: no-cache, so that a list the server
// shares between readers (server/http/shared_answers.h) is made for it.
std::vector<double> TimeGet(httplib::Client& client, const std::string& path, int samples, size_t* bytes) {
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = client.Get(path, {{"Cache-Control", "no-cache"}});
    auto t1 = std::chrono::steady_clock::now();
    if (!r || r->status != 200) {
      fprintf(stderr, "http_bench: GET %s failed\n", path.c_str());
      return {};
    }
    *bytes = r->body.size();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return ms;
}

int Run(int nodes, int samples) {
  ViewsOnly backend;
  Fill(backend.views, nodes);
  MetricsSources src;
  src.views = &backend.views;
  src.now = absl::Now();
  std::vector<double> render;
  size_t rendered = 0;
  for (int i = 0; i < samples; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    rendered = RenderMetrics(src).size();
    render.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  auto server = HttpServer::Bind(HttpOptions{});
  if (!server.ok()) {
    fprintf(stderr, "http_bench: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  AddRestRoutes(**server, &backend);
  AddMetricsRoute(**server, &backend, nullptr);
  (*server)->Serve();
  httplib::Client client("http://" + (*server)->address());
  client.set_read_timeout(30, 0);
  size_t metrics_bytes = 0, nodes_bytes = 0;
  std::vector<double> metrics = TimeGet(client, "/metrics", samples, &metrics_bytes);
  std::vector<double> node_list = TimeGet(client, "/api/v1/nodes", std::max(1, samples / 4), &nodes_bytes);
  size_t page_bytes = 0, middle_bytes = 0, filtered_bytes = 0, summary_bytes = 0;
  std::vector<double> page = TimeGet(client, "/api/v1/nodes?limit=100", samples, &page_bytes);
  std::string middle_path = absl::StrCat("/api/v1/nodes?limit=100&cursor=",
                                         NodeCursor(absl::StrFormat("node-%05d", nodes / 2)));
  std::vector<double> middle = TimeGet(client, middle_path, samples, &middle_bytes);
  std::vector<double> filtered =
      TimeGet(client, "/api/v1/nodes?limit=100&label=gpu%3Da100&model=A100&min_free_gpus=5&state=READY", samples,
              &filtered_bytes);
  std::vector<double> summary = TimeGet(client, "/api/v1/node-summary", samples, &summary_bytes);
  printf("HTTP API of a %d-node cluster (8 GPUs each, %d live jobs), %d samples, medians; %u CPUs here\n", nodes,
         nodes, samples, std::thread::hardware_concurrency());
  Row("/metrics rendered from the views", absl::StrFormat("%.1f ms", Median(render)), "");
  Row("GET /metrics served over HTTP", absl::StrFormat("%.1f ms", Median(metrics)), "target < 50 ms");
  Row("/metrics size", absl::StrFormat("%.2f MB (%zu bytes)", metrics_bytes / 1e6, metrics_bytes), "target < 2 MB");
  Row("GET /api/v1/nodes served over HTTP", absl::StrFormat("%.1f ms", Median(node_list)), "");
  Row("/api/v1/nodes size", absl::StrFormat("%.2f MB", nodes_bytes / 1e6), "");
  Row("GET /api/v1/nodes?limit=100 (first page)", absl::StrFormat("%.1f ms, %.0f kB", Median(page), page_bytes / 1e3),
      "target < 50 ms");
  Row("GET /api/v1/nodes?limit=100&cursor= (middle)",
      absl::StrFormat("%.1f ms, %.0f kB", Median(middle), middle_bytes / 1e3), "target < 50 ms");
  Row("GET /api/v1/nodes? label, model, free GPUs, state",
      absl::StrFormat("%.1f ms, %.0f kB", Median(filtered), filtered_bytes / 1e3), "target < 50 ms");
  Row("GET /api/v1/node-summary (heat map)", absl::StrFormat("%.1f ms, %.0f kB", Median(summary), summary_bytes / 1e3),
      "");
  (void)rendered;
  (*server)->Stop();
  return metrics.empty() ? 1 : 0;
}

}  // namespace
}  // namespace trainyard::server::http

int main(int argc, char** argv) {
  int nodes = 10000, samples = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--benchmark_", 0) == 0) continue;  // `make bench` passes these
    if (a.rfind("--nodes=", 0) == 0 && absl::SimpleAtoi(a.substr(8), &nodes) && nodes > 0) continue;
    if (a.rfind("--samples=", 0) == 0 && absl::SimpleAtoi(a.substr(10), &samples) && samples > 0) continue;
    fprintf(stderr, "http_bench: bad flag '%s'. Flags: --nodes=N --samples=N\n", argv[i]);
    return 2;
  }
  return trainyard::server::http::Run(nodes, samples);
}
