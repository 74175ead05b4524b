// The dashboard of a 1,000-node cluster in a headless browser: a real
// `trainyard server` (with HTTP) and 1,000 simulated agents (8 GPUs each,
// in this process, as control_plane_bench starts them), half the GPUs
// held by running one-GPU jobs; then bench/dashboard_paint.mjs loads the
// overview and the nodes page in chromium and prints first paint and the
// time until the data is drawn. Target: overview drawn in < 1 s.
// --http-threads=N starts the server with httpThreads N (default: the
// server's own, 4). The server's agent door is opened to every agent
// (maxAgentConnections; its default, an eighth of the open-file limit,
// refuses most of 10,000). --trainyard=PATH runs another build's server
// (and so its dashboard), e.g. main's for a before/after. Target at 10,000
// nodes: the nodes page has its first data in < 1 s.
//   build/<dir>/bench/dashboard_bench [--nodes=N] [--jobs=N] [--runs=N] [--http-threads=N] [--trainyard=PATH]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "control_plane_fleet.h"

namespace trainyard::bench {
namespace {

struct Flags {
  int nodes = 1000;
  int jobs = 4000;
  int runs = 5;
  int http_threads = 0;  // 0: the server's default
  std::string trainyard = TRAINYARD_BINARY;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name, int* out) {
      std::string prefix = absl::StrCat("--", name, "=");
      if (a.rfind(prefix, 0) == 0 && !absl::SimpleAtoi(a.substr(prefix.size()), out)) {
        fprintf(stderr, "dashboard_bench: %s is not a number\n", a.c_str());
        exit(2);
      }
    };
    value("nodes", &f.nodes);
    value("jobs", &f.jobs);
    value("runs", &f.runs);
    value("http-threads", &f.http_threads);
    if (a.rfind("--trainyard=", 0) == 0) f.trainyard = a.substr(12);
  }
  return f;
}

v1::SubmitRequest OneGpuJob(int i) {
  v1::SubmitRequest req;
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_name(absl::StrCat("train-", i));
  spec->set_user(absl::StrCat("user", i % 20));
  v1::ReplicaSpec* rs = spec->add_replicas();
  rs->set_role("worker");
  rs->set_count(1);
  rs->mutable_resources()->set_gpus(1);
  rs->mutable_resources()->set_vcores_milli(1000);
  rs->mutable_resources()->set_memory_mb(1024);
  rs->add_command("true");
  return req;
}

int Run(const Flags& f) {
  ScratchDir config_dir("trainyard_dashboard_bench");
  std::vector<std::string> args = {"server",      "--listen",    "127.0.0.1:0", "--data-dir", "{DIR}/data",
                                   "--no-jobmaster", "--log-level", "warning",  "--http-listen", "127.0.0.1:0",
                                   // Its clients send no token yet (figures with security on: a follow-up).
                                   "--no-auth"};
  std::string config = config_dir.path() + "/server.yaml";
  {
    std::ofstream out(config);
    // Nodes are given 120 s of silence: 10,000 registering agents beat only
    // once all are in, and nodes judged lost meanwhile would move the jobs.
    out << "maxAgentConnections: " << f.nodes + 64 << "\nnodeTimeoutMs: 120000\n";
    if (f.http_threads > 0) out << "httpThreads: " << f.http_threads << "\nhttpMaxConnections: " << 4 * f.http_threads << "\n";
  }
  args.insert(args.end(), {"--config", config});
  auto server = std::make_unique<ChildProcess>(f.trainyard, args, "listening on ");
  if (!server->Start()) return 1;
  std::string http = server->FindInOutput("/metrics on http://");
  while (!http.empty() && http.back() == '/') http.pop_back();
  FleetOptions fo;
  fo.agents = f.nodes;
  fo.task_ms = -1;  // tasks run until the end: their GPUs stay held
  Fleet fleet(server->FindInOutput("agents connect to "), fo);
  if (!fleet.Start(std::chrono::seconds(300))) {
    fprintf(stderr, "dashboard_bench: only %lld of %d agents registered\n",
            static_cast<long long>(fleet.counters().registered.load()), f.nodes);
    return 1;
  }
  fleet.StartHeartbeats();
  auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < f.jobs; ++i) {
    grpc::ClientContext ctx;
    v1::SubmitResponse resp;
    grpc::Status st = stub->Submit(&ctx, OneGpuJob(i), &resp);
    if (!st.ok()) {
      fprintf(stderr, "dashboard_bench: submit %d: %s\n", i, st.error_message().c_str());
      return 1;
    }
  }
  SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (fleet.counters().launches.load() < f.jobs && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  printf("dashboard_bench: %d simulated agents, %lld of %d one-GPU jobs launched; dashboard at http://%s/ (%s)\n",
         f.nodes, static_cast<long long>(fleet.counters().launches.load()), f.jobs, http.c_str(),
         f.http_threads > 0 ? absl::StrCat("httpThreads ", f.http_threads).c_str() : "the server's default httpThreads");
  fflush(stdout);
  std::string cmd = absl::StrCat("node '", TRAINYARD_SOURCE_DIR, "/bench/dashboard_paint.mjs' --url http://", http,
                                 " --runs ", f.runs);
  int rc = system(cmd.c_str());
  fleet.Stop();
  return rc == 0 ? 0 : 1;
}

}  // namespace
}  // namespace trainyard::bench

int main(int argc, char** argv) { return trainyard::bench::Run(trainyard::bench::ParseFlags(argc, argv)); }
