// Job master benchmarks. The master runs in a forked child process (as in
// production, its own process); the workers are simulated by SimFleet from
// this process, many sockets on one thread and one epoll set, so what is
// measured is the master. Prints medians and p99 as counters and, at the
// end, a summary against the targets of issue 5, including the same register
// + barrier workload on PyTorch's TCPStore (bench/tcpstore_compare.py, run
// with /usr/bin/python3).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"
#include "common/logging.h"
#include "jobmaster/client/job_master_client.h"
#include "jobmaster/jobmaster_server.h"
#include "jobmaster/sim_fleet.h"
#include "nlohmann/json.hpp"

namespace trainyard::jobmaster {
namespace {

// Figures for the summary, by name.
std::map<std::string, double>& Figures() {
  static std::map<std::string, double> figures;
  return figures;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// A master of `workers` workers in a child process.
struct MasterProcess {
  pid_t pid = -1;
  int port = 0;
  int ready_fd = -1;  // the child writes its port here once it listens
  int gate_fd = -1;   // a gated child starts once a byte arrives here

  // Listens on `bind_port` (0: any free port). A `gated` master waits for
  // Release() before it binds: a stand-in forked early (before any thread
  // of this process) for a master that is restarted later.
  // `uncapped`: no cap on partial frames (the master before its input caps).
  explicit MasterProcess(int workers, int bind_port = 0, bool gated = false,
                         bool uncapped = false, const std::string& secret = "") {
    int ready[2], gate[2];
    if (pipe(ready) != 0) return;
    if (pipe(gate) != 0) return;
    pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(gate[1]);
      char go = 0;
      if (gated && read(gate[0], &go, 1) != 1) _exit(0);
      SetLogLevel(LogLevel::kError);
      JobMasterConfig config;
      config.job_name = "bench";
      config.num_workers = workers;
      config.bind_address = "127.0.0.1";
      config.port = bind_port;
      config.learn_barriers = gated;  // a restarted master: its count comes from the workers
      if (uncapped) config.max_buffered_input_bytes = ~size_t{0};
      config.job_secret = secret;  // STARTING must carry it (security on)
      FakeJobTerminator terminator;
      RealClock clock;
      auto server = JobMasterServer::Create(config, &terminator, &clock);
      int p = server.ok() ? (*server)->port() : -1;
      if (write(ready[1], &p, sizeof(p)) != sizeof(p)) _exit(1);
      if (server.ok()) (void)(*server)->Run();
      _exit(0);
    }
    close(ready[1]);
    close(gate[0]);
    ready_fd = ready[0];
    gate_fd = gate[1];
    if (!gated) Release();
  }
  // Lets a gated master start and waits until it listens.
  void Release() {
    char go = 1;
    if (write(gate_fd, &go, 1) != 1 || read(ready_fd, &port, sizeof(port)) != sizeof(port)) {
      port = -1;
    }
  }
  // SIGKILL, as when the master's process dies.
  void Kill() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~MasterProcess() {
    Kill();
    close(ready_fd);
    close(gate_fd);
  }
  // CPU time the master used so far, in ms, from /proc.
  double CpuMs() const {
    std::ifstream stat(absl::StrFormat("/proc/%d/stat", pid));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t paren = text.rfind(')');
    if (paren == std::string::npos) return 0;
    unsigned long utime = 0, stime = 0;
    // Fields after the command: state, then 10 numbers, then utime and stime.
    if (std::sscanf(text.c_str() + paren + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                    &utime, &stime) != 2) {
      return 0;
    }
    return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  // Resident memory of the master in MB, from /proc: now (VmRSS) or its peak (VmHWM).
  double RssMb(const char* field = "VmRSS") const {
    std::ifstream status(absl::StrFormat("/proc/%d/status", pid));
    std::string line, format = absl::StrFormat("%s: %%ld kB", field);
    while (std::getline(status, line)) {
      long kb = 0;
      if (std::sscanf(line.c_str(), format.c_str(), &kb) == 1) return static_cast<double>(kb) / 1024;
    }
    return 0;
  }
  double PeakRssMb() const { return RssMb("VmHWM"); }
};

absl::Time Deadline() { return absl::Now() + absl::Seconds(60); }

// Connections per loopback source address (SimFleet::set_spread_sources).
constexpr int kPerSource = 5000;

// The soft limit on open files after raising it to the hard one.
uint64_t OpenFileLimit() {
  static uint64_t limit = RaiseOpenFileLimit();
  return limit;
}

std::vector<int> Range(int n) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

// range(1) = 1: the master has a job secret and the workers show it (what
// a master the server starts does); it is checked once, at STARTING.
void BM_Barrier(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  bool secret = state.range(1) != 0;
  std::string job_secret = secret ? std::string(64, 'a') : "";
  MasterProcess master(n, 0, false, false, job_secret);
  SimFleet fleet("127.0.0.1", master.port);
  fleet.set_keep_responses(false);
  fleet.set_spread_sources(kPerSource);
  fleet.set_job_secret(job_secret);
  if (!fleet.Connect(n, Deadline()).ok() || !fleet.RegisterAll(Range(n), Deadline()).ok()) {
    return state.SkipWithError("could not register the workers");
  }
  std::vector<double> ms;
  double cpu_before = master.CpuMs();
  for (auto _ : state) {
    fleet.ClearResponses();
    absl::Time start = absl::Now();
    if (!fleet.BarrierAll(n, Deadline()).ok()) return state.SkipWithError("barrier failed");
    absl::Duration took = absl::Now() - start;
    state.SetIterationTime(absl::ToDoubleSeconds(took));
    ms.push_back(absl::ToDoubleMilliseconds(took));
  }
  state.counters["p50_ms"] = Percentile(ms, 0.5);
  state.counters["p99_ms"] = Percentile(ms, 0.99);
  state.counters["master_cpu_ms"] =
      (master.CpuMs() - cpu_before) / static_cast<double>(std::max<size_t>(1, ms.size()));
  const char* kind = secret ? "_secret" : "";
  Figures()[absl::StrFormat("barrier_p50_%d%s", n, kind)] = Percentile(ms, 0.5);
  Figures()[absl::StrFormat("barrier_p99_%d%s", n, kind)] = Percentile(ms, 0.99);
}
BENCHMARK(BM_Barrier)->Args({64, 0})->Iterations(500)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Barrier)->Args({1000, 0})->Iterations(200)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Barrier)->Args({1000, 1})->Iterations(200)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Barrier)->Args({10000, 0})->Iterations(30)->UseManualTime()->Unit(benchmark::kMillisecond);

// STARTING from every worker, each followed by a RESPONSE_AFTER_ALL_JOINED
// list; done when every worker has the full list. Connections are opened
// before the clock starts; `with_connect_ms` includes them.
void BM_RegisterAllJoined(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  std::vector<double> ms, with_connect, cpu;
  for (auto _ : state) {
    MasterProcess master(n);
    SimFleet fleet("127.0.0.1", master.port);
    fleet.set_keep_responses(false);
    absl::Time connect_start = absl::Now();
    if (!fleet.Connect(n, Deadline()).ok()) return state.SkipWithError("connect failed");
    absl::Time start = absl::Now();
    fleet.ClearResponses();
    pb::JobMasterRequest starting, list;
    starting.set_request_id(1);
    list.set_request_id(2);
    list.mutable_list_workers()->set_mode(pb::RESPONSE_AFTER_ALL_JOINED);
    for (int i = 0; i < n; ++i) {
      starting.mutable_starting()->mutable_info()->set_worker_id(i);
      starting.mutable_starting()->mutable_info()->set_ip("127.0.0.1");
      starting.mutable_starting()->mutable_info()->set_port(20000 + i);
      fleet.Queue(i, starting);
      fleet.Queue(i, list);
    }
    if (!fleet.Exchange(2 * n, Deadline()).ok()) return state.SkipWithError("register failed");
    absl::Time end = absl::Now();
    cpu.push_back(master.CpuMs());
    // Each list entry takes at least 10 bytes: a shorter frame is not the full list.
    if (fleet.last_payload_bytes(n - 1) < static_cast<size_t>(10 * n)) {
      return state.SkipWithError("a worker got a short list");
    }
    state.SetIterationTime(absl::ToDoubleSeconds(end - start));
    ms.push_back(absl::ToDoubleMilliseconds(end - start));
    with_connect.push_back(absl::ToDoubleMilliseconds(end - connect_start));
  }
  state.counters["p50_ms"] = Percentile(ms, 0.5);
  state.counters["with_connect_ms"] = Percentile(with_connect, 0.5);
  state.counters["master_cpu_ms"] = Percentile(cpu, 0.5);
  Figures()[absl::StrFormat("register_list_%d", n)] = Percentile(ms, 0.5);
  Figures()[absl::StrFormat("register_list_connect_%d", n)] = Percentile(with_connect, 0.5);
}
BENCHMARK(BM_RegisterAllJoined)->Arg(64)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RegisterAllJoined)->Arg(1000)->Iterations(10)->UseManualTime()->Unit(benchmark::kMillisecond);

// `n` workers connect and register, in fleets of one process's sockets on
// loopback, spread over source addresses. When n connections do not fit
// under RLIMIT_NOFILE (here, a hard limit of 20,000 that the bench cannot
// raise), the workers come in waves of as many as fit: a wave connects,
// registers and closes (its workers stay registered, as the shell's
// `trainyard worker` ones do), then the next. Master RSS is read after the last.
void BM_Register(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  int wave = static_cast<int>(std::min<uint64_t>(n, OpenFileLimit() > 3000 ? OpenFileLimit() - 2000 : 1000));
  std::vector<double> seconds, rss, cpu;
  for (auto _ : state) {
    MasterProcess master(n);
    absl::Time start = absl::Now();
    int sources = 0;
    for (int first = 0; first < n; first += wave) {
      int count = std::min(wave, n - first);
      SimFleet fleet("127.0.0.1", master.port);
      fleet.set_keep_responses(false);
      fleet.set_spread_sources(kPerSource, sources);
      sources += count / kPerSource + 1;
      std::vector<int> ids(count);
      for (int i = 0; i < count; ++i) ids[i] = first + i;
      if (!fleet.Connect(count, Deadline()).ok()) return state.SkipWithError("connect failed");
      if (!fleet.RegisterAll(ids, Deadline()).ok()) return state.SkipWithError("register failed");
    }
    absl::Duration took = absl::Now() - start;
    state.SetIterationTime(absl::ToDoubleSeconds(took));
    seconds.push_back(absl::ToDoubleSeconds(took));
    rss.push_back(master.RssMb());
    cpu.push_back(master.CpuMs());
  }
  state.counters["register_s"] = Percentile(seconds, 0.5);
  state.counters["rss_mb"] = Percentile(rss, 0.5);
  state.counters["master_cpu_ms"] = Percentile(cpu, 0.5);
  state.counters["concurrent"] = wave;
  Figures()[absl::StrFormat("register_%d_s", n)] = Percentile(seconds, 0.5);
  Figures()[absl::StrFormat("rss_%d_mb", n)] = Percentile(rss, 0.5);
  Figures()[absl::StrFormat("concurrent_%d", n)] = wave;
}
BENCHMARK(BM_Register)->Arg(10000)->Arg(100000)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);

// The STARTING of a worker of a realistic big job: 8 ranks per host, hosts
// with their own addresses, ports 29500 + local rank.
pb::JobMasterRequest RealisticStarting(int id) {
  pb::JobMasterRequest r;
  r.set_request_id(1);
  pb::WorkerInfo* info = r.mutable_starting()->mutable_info();
  info->set_worker_id(id);
  info->set_ip(absl::StrFormat("10.%d.%d.%d", id / 8 / 65536, id / 8 / 256 % 256, id / 8 % 256));
  info->set_port(29500 + id % 8);
  info->set_node_ip(info->ip());
  info->set_role("worker");
  info->set_index(id);
  info->set_task_name(absl::StrFormat("bench-worker-%d", id));
  return r;
}

// Every worker registers and asks for the list with RESPONSE_AFTER_ALL_JOINED:
// arg 1 = 0 the classic list (WorkerStatus rows), 1 the worker table, 2 only
// rank 0. Prints the bytes the workers received in all, the master's CPU and
// its peak RSS.
void BM_AllJoinedDiscovery(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  int kind = static_cast<int>(state.range(1));
  std::vector<double> ms, cpu, bytes, rss;
  for (auto _ : state) {
    MasterProcess master(n);
    SimFleet fleet("127.0.0.1", master.port);
    fleet.set_keep_responses(false);
    fleet.set_spread_sources(kPerSource);
    if (!fleet.Connect(n, Deadline()).ok()) return state.SkipWithError("connect failed");
    double cpu_before = master.CpuMs();
    absl::Time start = absl::Now();
    pb::JobMasterRequest ask;
    ask.set_request_id(2);
    if (kind == 2) {
      ask.mutable_rank_zero();
    } else {
      ask.mutable_list_workers()->set_mode(pb::RESPONSE_AFTER_ALL_JOINED);
      ask.mutable_list_workers()->set_table(kind == 1);
    }
    for (int i = 0; i < n; ++i) {
      fleet.Queue(i, RealisticStarting(i));
      fleet.Queue(i, ask);
    }
    if (!fleet.Exchange(2 * n, Deadline()).ok()) return state.SkipWithError("discovery failed");
    absl::Duration took = absl::Now() - start;
    double total = 0;
    for (int i = 0; i < n; ++i) total += static_cast<double>(fleet.last_payload_bytes(i));
    state.SetIterationTime(absl::ToDoubleSeconds(took));
    ms.push_back(absl::ToDoubleMilliseconds(took));
    cpu.push_back(master.CpuMs() - cpu_before);
    bytes.push_back(total);
    rss.push_back(master.PeakRssMb());
  }
  const char* name = kind == 0 ? "list" : kind == 1 ? "table" : "rank0";
  state.counters["ms"] = Percentile(ms, 0.5);
  state.counters["master_cpu_ms"] = Percentile(cpu, 0.5);
  state.counters["bytes_per_worker"] = Percentile(bytes, 0.5) / n;
  state.counters["peak_rss_mb"] = Percentile(rss, 0.5);
  Figures()[absl::StrFormat("%s_%d_ms", name, n)] = Percentile(ms, 0.5);
  Figures()[absl::StrFormat("%s_%d_cpu_ms", name, n)] = Percentile(cpu, 0.5);
  Figures()[absl::StrFormat("%s_%d_mb_sent", name, n)] = Percentile(bytes, 0.5) / 1e6;
  Figures()[absl::StrFormat("%s_%d_rss_mb", name, n)] = Percentile(rss, 0.5);
}
BENCHMARK(BM_AllJoinedDiscovery)->Args({10000, 0})->Args({10000, 1})->Args({10000, 2})
    ->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);

// Opens `n` connections to the master on `port` and sends `bytes` on each,
// round after round, until each went whole or the master closed it.
// Returns the sockets (open: the stranger holds them).
std::vector<int> SendHalfFrames(int port, int n, const std::string& bytes) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::vector<int> fds;
  std::vector<size_t> sent(n, 0);
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fcntl(fd, F_SETFL, O_NONBLOCK);
    fds.push_back(fd);
  }
  absl::Time deadline = Deadline();
  for (bool more = true; more && absl::Now() < deadline;) {
    more = false;
    for (int i = 0; i < n; ++i) {
      while (sent[i] < bytes.size()) {
        ssize_t w = send(fds[i], bytes.data() + sent[i], bytes.size() - sent[i], MSG_NOSIGNAL);
        if (w > 0) {
          sent[i] += static_cast<size_t>(w);
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          more = true;
          break;
        } else if (!(w < 0 && errno == EINTR)) {
          sent[i] = bytes.size();  // the master closed it
        }
      }
    }
  }
  return fds;
}

// The probe: 1,100 connections each send half of a 1 MiB frame and
// stop; the master's RSS growth is read once each was read or cut off, with
// the input cap (the default, 16 MiB) and without it (as before the caps).
// Four workers then pass a barrier. Arg: 1 = capped, 0 = uncapped.
void BM_HalfFrameFlood(benchmark::State& state) {
  bool capped = state.range(0) == 1;
  constexpr int kFlood = 1100;
  std::string half(4 + 512 * 1024, 'x');
  half.replace(0, 4, std::string("\x00\x10\x00\x00", 4));  // announces 1 MiB
  for (auto _ : state) {
    MasterProcess master(4, 0, false, !capped);
    SimFleet fleet("127.0.0.1", master.port);
    if (!fleet.Connect(4, Deadline()).ok() || !fleet.RegisterAll(Range(4), Deadline()).ok()) {
      return state.SkipWithError("could not register the workers");
    }
    double rss_before = master.RssMb();
    absl::Time start = absl::Now();
    std::vector<int> fds = SendHalfFrames(master.port, kFlood, half);
    absl::Status barrier = fleet.BarrierAll(4, Deadline());
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
    if (!barrier.ok()) return state.SkipWithError("the workers' barrier failed during the flood");
    double grew = master.RssMb() - rss_before;
    for (int fd : fds) close(fd);
    state.counters["rss_growth_mb"] = grew;
    Figures()[capped ? "flood_rss_capped_mb" : "flood_rss_uncapped_mb"] = grew;
  }
}
BENCHMARK(BM_HalfFrameFlood)->Arg(1)->Arg(0)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// Workers in a barrier through `clients` (all but client 0, which stays
// out), each on its own thread; returns once the master lists them waiting.
bool EnterBarrier(std::vector<std::unique_ptr<JobMasterClient>>& clients,
                  std::vector<std::thread>* threads, std::atomic<int>* failed) {
  for (size_t id = 1; id < clients.size(); ++id) {
    threads->emplace_back([&clients, failed, id] {
      if (!clients[id]->WaitOnBarrier(absl::Seconds(60)).ok()) ++*failed;
    });
  }
  absl::Time deadline = Deadline();
  while (absl::Now() < deadline) {
    auto list = clients[0]->ListWorkers(pb::IMMEDIATE, absl::Seconds(10));
    if (!list.ok()) return false;
    size_t in = 0;
    for (const pb::WorkerStatus& w : list->workers()) in += w.in_barrier() ? 1 : 0;
    if (in + 1 == clients.size()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // poll pacing
  }
  return false;
}

// The worker library across a master crash: n-1 workers wait in a barrier,
// the master's process is SIGKILLed and a new one starts at once on the same
// port (the agent adds its restart backoff, 100 ms at first, and an exec);
// measured from the SIGKILL until every worker, the last one arriving after
// the kill, passed the barrier on the new master.
void BM_MasterRestart(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  std::vector<std::unique_ptr<MasterProcess>> masters;
  masters.push_back(std::make_unique<MasterProcess>(n));
  for (int64_t i = 0; i < state.max_iterations; ++i) {
    masters.push_back(std::make_unique<MasterProcess>(n, masters[0]->port, true));
  }
  SetLogLevel(LogLevel::kError);  // every worker warns of the lost connection
  std::vector<std::unique_ptr<JobMasterClient>> clients;
  for (int id = 0; id < n; ++id) {
    JobMasterClientOptions o;
    o.master_address = absl::StrFormat("127.0.0.1:%d", masters[0]->port);
    o.info.set_worker_id(id);
    o.info.set_ip("127.0.0.1");
    auto c = JobMasterClient::Start(o);
    if (!c.ok()) return state.SkipWithError("a worker could not register");
    clients.push_back(*std::move(c));
  }
  std::vector<double> ms;
  size_t current = 0;
  for (auto _ : state) {
    std::vector<std::thread> threads;
    std::atomic<int> failed{0};
    bool in = EnterBarrier(clients, &threads, &failed);
    absl::Time start = absl::Now();
    masters[current]->Kill();
    masters[++current]->Release();
    bool passed = in && clients[0]->WaitOnBarrier(absl::Seconds(60)).ok();
    for (auto& t : threads) t.join();
    absl::Duration took = absl::Now() - start;
    if (!passed || failed > 0) return state.SkipWithError("the barrier failed across the restart");
    state.SetIterationTime(absl::ToDoubleSeconds(took));
    ms.push_back(absl::ToDoubleMilliseconds(took));
  }
  state.counters["p50_ms"] = Percentile(ms, 0.5);
  state.counters["max_ms"] = Percentile(ms, 1.0);
  Figures()[absl::StrFormat("restart_barrier_%d", n)] = Percentile(ms, 0.5);
}
BENCHMARK(BM_MasterRestart)->Arg(64)->Iterations(5)->UseManualTime()->Unit(benchmark::kMillisecond);

// Runs `cmd` (a shell command) and parses what it printed as JSON into
// `*json`; "" on success, else why not (with what it printed).
std::string RunScript(const std::string& cmd, nlohmann::json* json) {
  FILE* out = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  while (out != nullptr && fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  if (out == nullptr || pclose(out) != 0) return "failed: " + text;
  *json = nlohmann::json::parse(text, nullptr, false);
  return json->is_discarded() ? "printed no JSON" : "";
}

// The same register + barrier workload on TCPStore, 64 ranks.
void BM_TcpStore(benchmark::State& state) {
  std::string script = std::string(TRAINYARD_SOURCE_DIR) + "/bench/tcpstore_compare.py";
  std::string cmd = absl::StrFormat("/usr/bin/python3 %s --workers %d --barriers 200 2>&1",
                                    script, state.range(0));
  for (auto _ : state) {
    nlohmann::json json;
    if (std::string err = RunScript(cmd, &json); !err.empty()) {
      return state.SkipWithError(("tcpstore_compare.py (is python3-torch installed?): " + err).c_str());
    }
    state.SetIterationTime(json["barrier_p50_ms"].get<double>() / 1e3);
    state.counters["p50_ms"] = json["barrier_p50_ms"].get<double>();
    state.counters["p99_ms"] = json["barrier_p99_ms"].get<double>();
    state.counters["register_ms"] = json["register_ms"].get<double>();
    Figures()["tcpstore_barrier_p50"] = json["barrier_p50_ms"].get<double>();
    Figures()["tcpstore_register"] = json["register_ms"].get<double>();
  }
}
BENCHMARK(BM_TcpStore)->Arg(64)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// Address rendezvous on TCPStore (bench/tcpstore_compare.py --discovery):
// every rank sets its address, then all read all, and separately all wait
// for rank 0's.
void BM_TcpStoreDiscovery(benchmark::State& state) {
  std::string script = std::string(TRAINYARD_SOURCE_DIR) + "/bench/tcpstore_compare.py";
  int n = static_cast<int>(state.range(0));
  std::string cmd = absl::StrFormat("/usr/bin/python3 %s --discovery --workers %d 2>&1", script, n);
  for (auto _ : state) {
    nlohmann::json json;
    if (std::string err = RunScript(cmd, &json); !err.empty()) {
      return state.SkipWithError(("tcpstore_compare.py --discovery: " + err).c_str());
    }
    state.SetIterationTime(json["all_ms"].get<double>() / 1e3);
    state.counters["all_ms"] = json["all_ms"].get<double>();
    state.counters["rank0_ms"] = json["rank0_ms"].get<double>();
    Figures()[absl::StrFormat("tcpstore_all_%d_ms", n)] = json["all_ms"].get<double>();
    Figures()[absl::StrFormat("tcpstore_rank0_%d_ms", n)] = json["rank0_ms"].get<double>();
  }
}
BENCHMARK(BM_TcpStoreDiscovery)->Arg(64)->Arg(1024)->Iterations(1)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void Line(const char* what, const char* key, const char* unit, double target, bool below) {
  auto it = Figures().find(key);
  if (it == Figures().end()) return (void)std::printf("  %-46s (not run)\n", what);
  if (target == 0) return (void)std::printf("  %-46s %10.3f %s\n", what, it->second, unit);
  bool met = below ? it->second < target : it->second >= target;
  std::printf("  %-46s %10.3f %-3s target %s %g  %s\n", what, it->second, unit, below ? "<" : ">=",
              target, met ? "met" : "MISSED");
}

void PrintSummary() {
  auto& f = Figures();
  if (f.count("barrier_p50_64") && f.count("tcpstore_barrier_p50")) {
    f["speedup_64"] = f["tcpstore_barrier_p50"] / f["barrier_p50_64"];
  }
  std::printf("\nJob master against the targets (medians unless p99):\n");
  Line("64 workers: barrier p50", "barrier_p50_64", "ms", 1.5, true);
  Line("64 workers: TCPStore barrier p50", "tcpstore_barrier_p50", "ms", 0, true);
  Line("64 workers: TCPStore p50 / job master p50", "speedup_64", "x", 4, false);
  Line("64 workers: register + all-joined list", "register_list_64", "ms", 0, true);
  Line("64 workers: register + list incl. connect", "register_list_connect_64", "ms", 0, true);
  Line("64 workers: TCPStore register (connect+add+wait)", "tcpstore_register", "ms", 0, true);
  Line("1,000 workers: register + all-joined list", "register_list_1000", "ms", 200, true);
  Line("1,000 workers: the same incl. connect", "register_list_connect_1000", "ms", 0, true);
  Line("1,000 workers: barrier p50", "barrier_p50_1000", "ms", 30, true);
  Line("1,000 workers: barrier p99", "barrier_p99_1000", "ms", 60, true);
  Line("1,000 workers, job secret on: barrier p50", "barrier_p50_1000_secret", "ms", 30, true);
  Line("10,000 workers: barrier p50", "barrier_p50_10000", "ms", 150, true);
  Line("10,000 workers: connect + register", "register_10000_s", "s", 3, true);
  Line("10,000 workers: master RSS after", "rss_10000_mb", "MB", 50, true);
  Line("100,000 workers: connect + register", "register_100000_s", "s", 10, true);
  Line("100,000 workers: master RSS after", "rss_100000_mb", "MB", 200, true);
  Line("100,000 workers: connections open at once", "concurrent_100000", "", 0, true);
  Line("10,000: register + all-joined classic list", "list_10000_ms", "ms", 0, true);
  Line("10,000: the same, bytes sent in all", "list_10000_mb_sent", "MB", 0, true);
  Line("10,000: the same, master CPU", "list_10000_cpu_ms", "ms", 0, true);
  Line("10,000: the same, master peak RSS", "list_10000_rss_mb", "MB", 0, true);
  Line("10,000: register + all-joined worker table", "table_10000_ms", "ms", 0, true);
  Line("10,000: the same, bytes sent in all", "table_10000_mb_sent", "MB", 0, true);
  Line("10,000: the same, master CPU", "table_10000_cpu_ms", "ms", 0, true);
  Line("10,000: the same, master peak RSS", "table_10000_rss_mb", "MB", 0, true);
  Line("10,000: register + rank 0's address", "rank0_10000_ms", "ms", 0, true);
  Line("10,000: the same, bytes sent in all", "rank0_10000_mb_sent", "MB", 0, true);
  Line("10,000: the same, master CPU", "rank0_10000_cpu_ms", "ms", 0, true);
  Line("TCPStore 64 ranks: set + all read all", "tcpstore_all_64_ms", "ms", 0, true);
  Line("TCPStore 64 ranks: set + wait for rank 0", "tcpstore_rank0_64_ms", "ms", 0, true);
  Line("TCPStore 1,024 ranks: set + all read all", "tcpstore_all_1024_ms", "ms", 0, true);
  Line("TCPStore 1,024 ranks: set + wait for rank 0", "tcpstore_rank0_1024_ms", "ms", 0, true);
  Line("64 workers: master SIGKILL to barrier passed", "restart_barrier_64", "ms", 0, true);
  Line("1,100 half-sent 1 MiB frames: RSS growth, capped", "flood_rss_capped_mb", "MB", 40, true);
  Line("the same without the input cap", "flood_rss_uncapped_mb", "MB", 0, true);
}

}  // namespace
}  // namespace trainyard::jobmaster

int main(int argc, char** argv) {
  trainyard::jobmaster::RaiseOpenFileLimit();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  trainyard::jobmaster::PrintSummary();
  return 0;
}
