// Training-job benchmark (issue 6 targets) on a real `trainyard up --nodes 4`
// cluster: a server, 4 agents with 8 simulated GPUs each and a job master per
// job, all separate processes. Two figures:
//   startup: Submit of a TensorFlow job with 2 ps + 16 workers (1 GPU each,
//     `sleep 600`) until DescribeJob shows every task (the job master too)
//     TASK_RUNNING; then KillJob and wait until every GPU is free again.
//     Target p50 < 300 ms.
//   restart: a one-worker job (OnFailure, maxRestarts 1000) whose command
//     writes its pid to a file and then execs `sleep 600`; the bench SIGKILLs
//     that pid and measures until (a) a new pid is in the file (the new
//     process runs) and (b) DescribeJob shows the worker TASK_RUNNING at the
//     next attempt. The agent's restart backoff is subtracted: it is
//     100 ms * 2^restarts-so-far (src/agent/restart_backoff.h NextRestartDelay(),
//     no per-job override), and each figure is checked against the
//     "restart K of N in D" line the agent logged. A job is killed and a new
//     one submitted every --restarts-per-job kills so backoffs stay short.
//     Target p50 < 200 ms.
// A plain main() that prints a table; about 40 s with the defaults (40 + 30
// samples); raise --samples / --restart-samples for longer runs.
//   build/<dir>/bench/training_bench [--only=startup|restart] [--samples=N]
//       [--restart-samples=N] [--restarts-per-job=K] [--trainyard=PATH]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "control_plane_fleet.h"
#include "security/client_config.h"

namespace trainyard::bench {
namespace {

struct Flags {
  std::string only;  // "" = both
  int samples = 40;
  int restart_samples = 30;
  int restarts_per_job = 3;
  int nodes = 4;
  std::string trainyard = TRAINYARD_BINARY;
};

constexpr int kBackoffInitialMs = 100;  // the agent's default (src/agent/task.h)

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string Ms(double seconds) { return absl::StrFormat("%.1f ms", seconds * 1000); }

void Line(const char* what, const std::vector<double>& v, const char* target) {
  std::string value = absl::StrCat(Ms(Percentile(v, 0.5)), " / ", Ms(Percentile(v, 0.9)), " / ",
                                   Ms(v.empty() ? 0 : *std::max_element(v.begin(), v.end())));
  printf("  %-48s %-30s %s\n", what, value.c_str(), target);
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// A client of the server at `address`: TLS verified with `ca_pem` (up's
// cluster CA) when there is one, else plaintext.
std::unique_ptr<v1::Trainyard::Stub> ClientStub(const std::string& address, const std::string& ca_pem) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto credentials = ca_pem.empty() ? grpc::InsecureChannelCredentials()
                                    : grpc::SslCredentials({.pem_root_certs = ca_pem});
  return v1::Trainyard::NewStub(grpc::CreateCustomChannel(address, credentials, args));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The `trainyard up` cluster and a client of its server.
struct UpCluster {
  ScratchDir data{"trainyard_training_bench_up"};
  std::unique_ptr<ChildProcess> up;
  std::unique_ptr<v1::Trainyard::Stub> stub;
  std::string logs;  // the up data dir; logs in LOGS/up/logs/{server,node-I}.log

  bool Start(const Flags& f) {
    up = std::make_unique<ChildProcess>(
        f.trainyard,
        std::vector<std::string>{"up", "--nodes", absl::StrCat(f.nodes), "--data-dir", data.path() + "/up", "--port",
                                 absl::StrCat(FreePort())},
        "Trainyard is up: server ");
    if (!up->Start()) return false;
    logs = data.path();
    // The admin credential up wrote (docs/security.md), and the cluster CA
    // its server's certificate is verified with.
    absl::StatusOr<trainyard::security::ClientConfig> config =
        trainyard::security::LoadClientConfig(data.path() + "/up/client.yaml");
    if (!config.ok() || config->token.empty()) {
      fprintf(stderr, "training_bench: no token in %s/up/client.yaml: %s\n", data.path().c_str(),
              config.ok() ? "" : std::string(config.status().message()).c_str());
      return false;
    }
    token = config->token;
    stub = ClientStub(up->address(), config->ca_file.empty() ? "" : ReadAll(config->ca_file));
    return true;
  }

  // A call's context with up's admin token.
  void Authorize(grpc::ClientContext* ctx) const { ctx->AddMetadata("authorization", "Bearer " + token); }
  std::string token;

  std::optional<v1::JobView> Describe(const std::string& job) {
    grpc::ClientContext ctx;
    Authorize(&ctx);
    v1::DescribeJobRequest req;
    req.set_job(job);
    v1::JobView view;
    if (!stub->DescribeJob(&ctx, req, &view).ok()) return std::nullopt;
    return view;
  }

  std::string Submit(const std::string& yaml) {
    grpc::ClientContext ctx;
    Authorize(&ctx);
    v1::SubmitRequest req;
    req.set_yaml(yaml);
    v1::SubmitResponse resp;
    grpc::Status st = stub->Submit(&ctx, req, &resp);
    if (!st.ok()) fprintf(stderr, "training_bench: submit: %s\n", st.error_message().c_str());
    return st.ok() ? resp.job() : "";
  }

  void Kill(const std::string& job) {
    grpc::ClientContext ctx;
    Authorize(&ctx);
    v1::KillJobRequest req;
    req.set_job(job);
    req.set_reason("benchmark sample done");
    v1::KillJobResponse resp;
    grpc::Status st = stub->KillJob(&ctx, req, &resp);
    if (!st.ok()) fprintf(stderr, "training_bench: kill %s: %s\n", job.c_str(), st.error_message().c_str());
  }

  // Waits up to 60 s until every node shows all its GPUs free (and, with
  // tasks_too, no task left on it).
  bool WaitIdle(bool tasks_too = false) {
    SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (SteadyClock::now() < deadline) {
      grpc::ClientContext ctx;
      Authorize(&ctx);
      v1::ListNodesResponse resp;
      if (stub->ListNodes(&ctx, v1::ListNodesRequest(), &resp).ok()) {
        bool idle = resp.nodes_size() > 0;
        for (const v1::NodeView& n : resp.nodes()) {
          uint64_t all = n.info().capacity().gpus() >= 64 ? ~0ull : (1ull << n.info().capacity().gpus()) - 1;
          idle = idle && n.free_gpu_mask() == all && (!tasks_too || n.tasks_size() == 0);
        }
        if (idle) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    fprintf(stderr, "training_bench: GPUs %s still taken after 60 s\n", tasks_too ? "or tasks" : "");
    return false;
  }
};

// ---- startup: submit to every task RUNNING ----

std::string PsWorkerYaml(int i) {
  return absl::StrCat("name: tb-startup-", i, R"(
framework: tensorflow
replicas:
  ps:
    count: 2
    resources: {cpu: 500m, memory: 256Mi, ports: 1}
    command: [sleep, "600"]
  worker:
    count: 16
    resources: {cpu: 500m, memory: 256Mi, gpus: 1, ports: 1}
    command: [sleep, "600"]
)");
}

bool AllRunning(const v1::JobView& view, int want_tasks) {
  if (view.tasks_size() < want_tasks) return false;
  for (const v1::TaskView& t : view.tasks()) {
    if (t.state() != v1::TASK_RUNNING) return false;
  }
  return true;
}

bool RunStartup(const Flags& f, UpCluster& c) {
  constexpr int kTasks = 2 + 16 + 1;  // ps, workers, the job master
  std::vector<double> running, server_side, scheduled, idle_wait, tasks_gone;
  int polls = 0;
  for (int i = 0; i < f.samples; ++i) {
    SteadyTime t0 = SteadyClock::now();
    std::string job = c.Submit(PsWorkerYaml(i));
    if (job.empty()) return false;
    std::optional<v1::JobView> view;
    SteadyTime deadline = t0 + std::chrono::seconds(20);
    while (SteadyClock::now() < deadline) {
      ++polls;
      view = c.Describe(job);
      if (view && AllRunning(*view, kTasks)) break;
      if (view && view->state() >= v1::JOB_SUCCEEDED) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!view || !AllRunning(*view, kTasks)) {
      fprintf(stderr, "training_bench: job %s: not all %d tasks RUNNING after 20 s (state %d, %d tasks, %s)\n",
              job.c_str(), kTasks, view ? static_cast<int>(view->state()) : -1, view ? view->tasks_size() : 0,
              view ? view->reason().c_str() : "");
      return false;
    }
    running.push_back(SecondsBetween(t0, SteadyClock::now()));
    if (view->start_time_unix_ms() > 0) {
      server_side.push_back((view->start_time_unix_ms() - view->submit_time_unix_ms()) / 1000.0);
    }
    for (const v1::JobEvent& e : view->events()) {
      if (e.kind() == "scheduled") {
        scheduled.push_back((e.time_unix_ms() - view->submit_time_unix_ms()) / 1000.0);
        break;
      }
    }
    SteadyTime k0 = SteadyClock::now();
    c.Kill(job);
    if (!c.WaitIdle()) return false;
    idle_wait.push_back(SecondsBetween(k0, SteadyClock::now()));
    // Once (it takes seconds, see docs/benchmarks.md): until no task is left.
    if (i == 0 && c.WaitIdle(true)) tasks_gone.push_back(SecondsBetween(k0, SteadyClock::now()));
  }
  printf("\nsubmit to all tasks RUNNING: tensorflow 2 ps + 16 workers (1 GPU each) + job master,\n"
         "  `trainyard up --nodes %d` (8 simulated GPUs each), %d samples, DescribeJob every ~1 ms"
         " (%.0f per job)\n", f.nodes, f.samples, static_cast<double>(polls) / f.samples);
  printf("  %-48s %-30s\n", "", "p50 / p90 / max");
  Line("Submit .. DescribeJob shows all 19 tasks RUNNING", running, "target p50 < 300 ms");
  Line("server: submit time .. job start time", server_side, "");
  Line("  of which submit .. first 'scheduled' event", scheduled, "");
  Line("KillJob .. every GPU free again", idle_wait, "");
  Line("KillJob .. no task left on any node (1st job)", tasks_gone, "");
  return true;
}

// ---- restart: SIGKILL to the new attempt RUNNING ----

std::string RestartYaml(int group, const std::string& pid_file) {
  return absl::StrCat("name: tb-restart-", group, R"(
replicas:
  worker:
    count: 1
    resources: {cpu: 500m, memory: 256Mi, gpus: 1}
    command: [sh, -c, 'echo $$ > )", pid_file, ".tmp && mv ", pid_file, ".tmp ", pid_file, R"( && exec sleep 600']
    restartPolicy: OnFailure
    maxRestarts: 1000
)");
}

int ReadPid(const std::string& path) {
  int pid = 0;
  std::string text = ReadAll(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return absl::SimpleAtoi(text, &pid) ? pid : 0;
}

const v1::TaskView* Worker(const v1::JobView& view) {
  for (const v1::TaskView& t : view.tasks()) {
    if (t.role() == "worker") return &t;
  }
  return nullptr;
}

// Milliseconds since midnight of a log time "HH:MM:SS.mmm"; -1 if malformed.
int64_t MsOfDay(const std::string& hms) {
  int h = 0, m = 0, sec = 0, ms = 0;
  if (sscanf(hms.c_str(), "%d:%d:%d.%d", &h, &m, &sec, &ms) != 4) return -1;
  return ((int64_t{h} * 60 + m) * 60 + sec) * 1000 + ms;
}

// Now as the agents' log lines print it (local time, ms), in ms of the day.
int64_t NowMsOfDay() { return MsOfDay(absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone())); }

// What the agents logged about one restart of JOB/worker-0.
struct LoggedRestart {
  int64_t ended_ms = -1;    // "RESTARTING: ... restart K of N in D" line
  double backoff_ms = -1;   // D
  int64_t started_ms = -1;  // "attempt K started as pid" line
};

// Restart K (1-based) -> what the agents' logs say about it.
std::map<int, LoggedRestart> LoggedRestarts(const std::string& logs_dir, const std::string& job, int nodes) {
  std::map<int, LoggedRestart> out;
  std::string key = absl::StrCat(": ", job, "/worker-0 ");
  std::regex restarting(R"(^\S+ (\S+) .*RESTARTING: .*restart (\d+) of \d+ in ([0-9.]+)(ms|s)$)");
  std::regex started(R"(^\S+ (\S+) .*attempt (\d+) started as pid)");
  for (int i = 0; i < nodes; ++i) {
    std::ifstream in(absl::StrCat(logs_dir, "/up/logs/node-", i, ".log"));
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (line.find(key) == std::string::npos) continue;
      if (std::regex_search(line, m, restarting)) {
        LoggedRestart& r = out[std::stoi(m[2].str())];
        r.ended_ms = MsOfDay(m[1].str());
        r.backoff_ms = std::stod(m[3].str()) * (m[4].str() == "s" ? 1000 : 1);
      } else if (std::regex_search(line, m, started)) {
        int attempt = std::stoi(m[2].str());
        if (attempt > 0) out[attempt].started_ms = MsOfDay(m[1].str());
      }
    }
  }
  return out;
}

struct RestartSample {
  double process = 0;  // kill .. new pid in the file
  double server = 0;   // kill .. DescribeJob shows the next attempt RUNNING
  double backoff = 0;  // what the agent waited on purpose
  int64_t kill_ms = 0; // when the SIGKILL was sent, ms of the day (log clock)
};

// One kill of the current attempt; false on a timeout.
bool KillOnce(UpCluster& c, const std::string& job, const std::string& pid_file, int restarts_so_far,
              RestartSample* s) {
  int pid = ReadPid(pid_file);
  std::optional<v1::JobView> view = c.Describe(job);
  const v1::TaskView* w = view ? Worker(*view) : nullptr;
  if (pid <= 0 || w == nullptr || w->state() != v1::TASK_RUNNING) return false;
  int attempt = w->attempt();
  s->backoff = kBackoffInitialMs * std::pow(2.0, restarts_so_far) / 1000.0;
  s->kill_ms = NowMsOfDay();
  SteadyTime t0 = SteadyClock::now();
  kill(pid, SIGKILL);
  bool have_proc = false, have_srv = false;
  SteadyTime deadline = t0 + std::chrono::seconds(20);
  while ((!have_proc || !have_srv) && SteadyClock::now() < deadline) {
    if (!have_proc) {
      int now_pid = ReadPid(pid_file);
      if (now_pid > 0 && now_pid != pid) {
        have_proc = true;
        s->process = SecondsBetween(t0, SteadyClock::now());
      }
    }
    if (!have_srv) {
      view = c.Describe(job);
      w = view ? Worker(*view) : nullptr;
      if (w != nullptr && w->state() == v1::TASK_RUNNING && w->attempt() > attempt) {
        have_srv = true;
        s->server = SecondsBetween(t0, SteadyClock::now());
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  if (!have_proc || !have_srv) {
    fprintf(stderr, "training_bench: %s: after SIGKILL of pid %d, new process %s, RUNNING at attempt %d %s\n",
            job.c_str(), pid, have_proc ? "seen" : "NOT seen", attempt + 1, have_srv ? "seen" : "NOT seen");
    return false;
  }
  return true;
}

bool RunRestart(const Flags& f, UpCluster& c) {
  ScratchDir dir("trainyard_training_bench");
  std::vector<double> process, server, process_raw, backoff, detect, agent_start;
  int mismatches = 0;
  for (int group = 0; static_cast<int>(process.size()) < f.restart_samples; ++group) {
    std::string pid_file = absl::StrCat(dir.path(), "/pid-", group);
    std::string job = c.Submit(RestartYaml(group, pid_file));
    if (job.empty()) return false;
    SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(20);
    std::optional<v1::JobView> view;
    while (SteadyClock::now() < deadline) {
      view = c.Describe(job);
      const v1::TaskView* w = view ? Worker(*view) : nullptr;
      if (w != nullptr && w->state() == v1::TASK_RUNNING && ReadPid(pid_file) > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::vector<RestartSample> samples;
    for (int r = 0; r < f.restarts_per_job && static_cast<int>(process.size() + samples.size()) < f.restart_samples;
         ++r) {
      RestartSample s;
      if (!KillOnce(c, job, pid_file, r, &s)) return false;
      samples.push_back(s);
    }
    c.Kill(job);
    std::map<int, LoggedRestart> logged = LoggedRestarts(c.logs, job, f.nodes);
    for (size_t r = 0; r < samples.size(); ++r) {
      const RestartSample& s = samples[r];
      const LoggedRestart& l = logged[static_cast<int>(r) + 1];
      if (l.backoff_ms != s.backoff * 1000) ++mismatches;
      process.push_back(s.process - s.backoff);
      server.push_back(s.server - s.backoff);
      process_raw.push_back(s.process);
      backoff.push_back(s.backoff);
      if (l.ended_ms >= 0) detect.push_back((l.ended_ms - s.kill_ms) / 1000.0);
      if (l.ended_ms >= 0 && l.started_ms >= 0) {
        agent_start.push_back((l.started_ms - l.ended_ms - l.backoff_ms) / 1000.0);
      }
    }
    if (!c.WaitIdle()) return false;
  }
  printf("\nworker crash (SIGKILL) to its restart running, one-worker jobs, OnFailure, %d samples\n"
         "  (%d kills per job: backoffs 100, 200, 400 ms...; backoff = 100 ms * 2^restarts subtracted;"
         " restarts whose agent-logged backoff differs: %d)\n",
         f.restart_samples, f.restarts_per_job, mismatches);
  printf("  %-48s %-30s\n", "", "p50 / p90 / max");
  Line("kill .. new process wrote its pid, less backoff", process, "target p50 < 200 ms");
  Line("kill .. DescribeJob RUNNING at attempt+1, less bkf", server, "target p50 < 200 ms");
  Line("kill .. new process (backoff included)", process_raw, "");
  Line("backoff subtracted", backoff, "");
  printf("  from the agent's log lines (ms resolution):\n");
  Line("  kill .. agent logs RESTARTING (exit seen)", detect, "");
  Line("  RESTARTING .. 'started as pid', less backoff", agent_start, "");
  return mismatches == 0;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      size_t n = strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    const char* v = nullptr;
    bool ok = true;
    if ((v = value("--only="))) {
      f->only = v;
      ok = f->only == "startup" || f->only == "restart";
    } else if ((v = value("--samples="))) {
      ok = absl::SimpleAtoi(v, &f->samples) && f->samples > 0;
    } else if ((v = value("--restart-samples="))) {
      ok = absl::SimpleAtoi(v, &f->restart_samples) && f->restart_samples > 0;
    } else if ((v = value("--restarts-per-job="))) {
      ok = absl::SimpleAtoi(v, &f->restarts_per_job) && f->restarts_per_job > 0 && f->restarts_per_job <= 8;
    } else if ((v = value("--trainyard="))) {
      f->trainyard = v;
    } else if (a.rfind("--benchmark", 0) == 0) {
      // Google Benchmark flags from `make bench`: nothing to do.
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr,
              "training_bench: bad flag %s; flags: --only=startup|restart --samples=N (> 0) "
              "--restart-samples=N (> 0) --restarts-per-job=K (1..8) --trainyard=PATH\n",
              a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace trainyard::bench

int main(int argc, char** argv) {
  using namespace trainyard::bench;
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  UpCluster cluster;
  if (!cluster.Start(f)) return 1;
  if (!cluster.WaitIdle(true)) return 1;
  bool ok = true;
  if (f.only.empty() || f.only == "startup") ok = RunStartup(f, cluster) && ok;
  if (f.only.empty() || f.only == "restart") ok = RunRestart(f, cluster) && ok;
  fflush(stdout);
  return ok ? 0 : 1;
}
