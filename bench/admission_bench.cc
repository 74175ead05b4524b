// Admission benchmark (issue 29): what one submission costs the server, and
// whether another user waits on it.
//   cost  in process: a ControlState with 1,250 nodes (32 cores, 64 GiB, 8
//         GPUs each: 10,000 GPUs) and a backend that drops what it is sent;
//         per spec, this thread's CPU for CheckSubmission (the part run
//         outside the server's lock), PrepareChecked + AcceptCommitted (under
//         it), the round that places the job and builds its launch orders,
//         and the publication of its views. Target: admission < 50 ms.
//   list  a real `trainyard server` (no agents, so jobs stay QUEUED): the
//         server process's CPU per Submit of each spec (utime+stime from
//         /proc, gRPC, parse and the durable write included), then ListJobs
//         p50/p99 from one client while another submits the largest allowed
//         spec back to back, against ListJobs with no submissions.
// Specs: 1 task; 1,000 tasks; 100 roles of 1 task; the largest allowed by the
// default bounds (100 roles of 20 tasks = 2,000 tasks, 9 KB of env per role,
// ~0.9 MB of YAML).
//   build/<dir>/bench/admission_bench [--only=cost|list] [--seconds=S] [--trainyard=PATH]
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/job_spec.h"
#include "control_plane_fleet.h"
#include "common/logging.h"
#include "server/control/control_state.h"
#include "server/execution_backend.h"
#include "server/control/test_node.h"
#include "server/view_store.h"

namespace trainyard::bench {
namespace {

struct Spec {
  std::string what;
  std::string yaml;
};

std::vector<Spec> Specs() {
  std::vector<Spec> specs;
  specs.push_back({"1 task", "name: one\nreplicas:\n  worker: {command: [sleep, '100']}\n"});
  specs.push_back({"1,000 tasks", "name: wide\nreplicas:\n  worker: {count: 1000, command: [sleep, '100']}\n"});
  std::string roles = "name: roles\nreplicas:\n";
  for (int r = 0; r < 100; ++r) absl::StrAppend(&roles, "  r", r, ": {command: [sleep, '100']}\n");
  specs.push_back({"100 roles", roles});
  std::string largest = "name: largest\nreplicas:\n";
  for (int r = 0; r < 100; ++r) {
    absl::StrAppend(&largest, "  r", r, ": {count: 20, command: [sleep, '100'], env: {PAD: ", std::string(9000, 'x'),
                    "}}\n");
  }
  specs.push_back({absl::StrFormat("largest (2,000 tasks, %d KB)", largest.size() / 1000), largest});
  return specs;
}

double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Drops what the control state sends to agents, counting launch bytes.
class NullBackend : public server::ExecutionBackend {
 public:
  void Registered(const std::string&, uint64_t, const v1::Registered&) override {}
  void Launch(const std::string&, v1::TaskSpec t) override { bytes += t.ByteSizeLong(); }
  void Kill(const std::string&, const v1::KillTask&) override {}
  void UpdateFiles(const std::string&, const v1::TaskFiles&) override {}
  int64_t bytes = 0;
};

std::string Ms(double s) { return absl::StrFormat("%.2f ms", s * 1000); }

bool Cost() {
  printf("cost: in process, 1,250 nodes x 8 GPUs; this thread's CPU per phase (median of 5)\n");
  printf("  %-30s %11s %11s %11s %11s %12s %10s\n", "spec", "unlocked", "locked", "admission", "round", "views",
         "launches");
  for (const Spec& spec : Specs()) {
    std::vector<double> unlocked, locked, round, views;
    int64_t launch_bytes = 0;
    for (int rep = 0; rep < 5; ++rep) {
      server::ServerConfig config;
      config.jobmaster_enabled = false;
      auto sched = core::Scheduler::Create(core::SchedulerOptions{});
      if (!sched.ok()) return false;
      NullBackend backend;
      absl::Time now = absl::FromUnixSeconds(1'800'000'000);
      server::ControlState state(config, std::move(*sched), &backend, now);
      state.Recover({}, {}, now);
      for (int n = 0; n < 1250; ++n) {
        if (!state.RegisterAgent(server::testing::TestNode(absl::StrCat("node-", n), 8, absl::StrCat("10.0.", n / 250, ".", n % 250)),
                                 n + 1, now).ok()) {
          return false;
        }
      }
      server::ViewStore store;
      state.RunRound(now);
      state.PublishJobs(&store);
      state.PublishNodesAndQueues(&store, now);
      double t0 = ThreadCpu();
      v1::JobSpec parsed;
      std::vector<std::string> problems = api::ParseJobSpecYamlInto(spec.yaml, &parsed);
      absl::StatusOr<server::CheckedSpec> checked =
          server::CheckSubmission(std::move(parsed), std::move(problems), config, core::DefaultQueues().root);
      double t1 = ThreadCpu();
      if (!checked.ok()) {
        fprintf(stderr, "%s: %s\n", spec.what.c_str(), std::string(checked.status().message()).c_str());
        return false;
      }
      absl::StatusOr<server::PreparedJob> prepared = state.PrepareChecked(*std::move(checked), now);
      if (!prepared.ok() || !state.AcceptCommitted(*prepared, absl::OkStatus()).ok()) return false;
      double t2 = ThreadCpu();
      state.RunRound(now);
      double t3 = ThreadCpu();
      state.PublishJobs(&store);
      state.PublishNodesAndQueues(&store, now + absl::Seconds(1));
      double t4 = ThreadCpu();
      unlocked.push_back(t1 - t0);
      locked.push_back(t2 - t1);
      round.push_back(t3 - t2);
      views.push_back(t4 - t3);
      launch_bytes = backend.bytes;
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    printf("  %-30s %11s %11s %11s %11s %12s %7.1f MB\n", spec.what.c_str(), Ms(median(unlocked)).c_str(),
           Ms(median(locked)).c_str(), Ms(median(unlocked) + median(locked)).c_str(), Ms(median(round)).c_str(),
           Ms(median(views)).c_str(), launch_bytes / 1e6);
  }
  printf("  admission = unlocked (parse, bounds, validation) + locked (naming, records, request, taken in)\n");
  return true;
}

grpc::Status Submit(v1::Trainyard::Stub& stub, const std::string& yaml) {
  v1::SubmitRequest req;
  req.set_yaml(yaml);
  v1::SubmitResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub.Submit(&ctx, req, &resp);
}

std::unique_ptr<v1::Trainyard::Stub> Stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(64 << 20);  // as the CLI (src/cli/client.cc): the list grows past 4 MB
  return v1::Trainyard::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// ListJobs latencies (seconds) for `seconds`.
std::vector<double> ListFor(v1::Trainyard::Stub& stub, double seconds) {
  std::vector<double> out;
  int refused = 0;
  SteadyTime end = SteadyClock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (SteadyClock::now() < end) {
    // Every job, page after page, as `trainyard jobs -o json` lists them.
    v1::ListJobsRequest req;
    grpc::Status st;
    SteadyTime t = SteadyClock::now();
    do {
      v1::ListJobsResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      st = stub.ListJobs(&ctx, req, &resp);
      req.set_page_token(resp.next_page_token());
    } while (st.ok() && !req.page_token().empty());
    if (st.ok()) {
      out.push_back(SecondsBetween(t, SteadyClock::now()));
    } else if (refused++ == 0) {
      fprintf(stderr, "  ListJobs refused: %s\n", st.error_message().c_str());
    }
  }
  if (refused > 0) printf("  (%d ListJobs calls refused)\n", refused);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Percentiles(const std::vector<double>& v) {
  if (v.empty()) return "none answered";
  return absl::StrFormat("p50 %s  p99 %s  (%d calls)", Ms(v[v.size() / 2]), Ms(v[v.size() * 99 / 100]),
                         static_cast<int>(v.size()));
}

bool List(const std::string& trainyard, double seconds) {
  printf("list: a `trainyard server` process, no agents (jobs stay QUEUED)\n");
  auto server = ServerProcess(trainyard, {.log_level = "warning",
                                          .extra_args = {"--config", "{DIR}/server.yaml"}});
  // Submissions are not refused for their rate or number here.
  std::ofstream(absl::StrCat(server->dir(), "/server.yaml")) << "maxPendingJobsPerUser: 0\n";
  if (!server->Start()) return false;
  auto submitter = Stub(server->address());
  auto lister = Stub(server->address());
  for (const Spec& spec : Specs()) {
    const int n = spec.yaml.size() > 100000 ? 20 : 50;
    double before = ProcessCpuSeconds(server->pid());
    for (int i = 0; i < n; ++i) {
      grpc::Status st = Submit(*submitter, spec.yaml);
      if (!st.ok()) {
        fprintf(stderr, "%s: %s\n", spec.what.c_str(), st.error_message().c_str());
        return false;
      }
    }
    printf("  %-44s %s of server CPU per Submit (%d)\n", spec.what.c_str(),
           Ms((ProcessCpuSeconds(server->pid()) - before) / n).c_str(), n);
  }
  printf("  ListJobs, nothing else running:                    %s\n", Percentiles(ListFor(*lister, seconds)).c_str());
  std::atomic<bool> stop{false};
  std::atomic<int> submitted{0};
  const std::string largest = Specs().back().yaml;
  std::thread loop([&] {
    while (!stop) submitted += Submit(*submitter, largest).ok() ? 1 : 0;
  });
  std::vector<double> during = ListFor(*lister, seconds);
  stop = true;
  loop.join();
  printf("  ListJobs while another client submits the largest: %s; %d largest submitted\n",
         Percentiles(during).c_str(), submitted.load());
  return true;
}

}  // namespace
}  // namespace trainyard::bench

int main(int argc, char** argv) {
  std::string only, trainyard = TRAINYARD_BINARY;
  double seconds = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--only=", 0) == 0) only = a.substr(7);
    else if (a.rfind("--seconds=", 0) == 0) seconds = std::stod(a.substr(10));
    else if (a.rfind("--trainyard=", 0) == 0) trainyard = a.substr(12);
  }
  // The in-process cluster logs a line per node it registers: not figures.
  trainyard::SetLogLevel(trainyard::LogLevel::kWarning);
  bool ok = true;
  if (only.empty() || only == "cost") ok = trainyard::bench::Cost() && ok;
  if (only.empty() || only == "list") ok = trainyard::bench::List(trainyard, seconds) && ok;
  return ok ? 0 : 1;
}
