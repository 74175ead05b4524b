// Benchmarks of the node agent's local work: the latency from
// Supervisor::Launch to the RUNNING status of a real process (fork, cgroup or
// limits setup, exec), the full launch-to-exit round trip of `true`, and
// reading the ports in use from /proc/net (done on every heartbeat), and
// rendering the agent's /metrics for a node of 64 GPUs.
// The launch latency is the agent's share of the "submit to RUNNING p50 under
// 50 ms" target of issue 4.
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics.h"
#include "agent/ports_in_use.h"
#include "agent/process_spawn.h"
#include "agent/resource_limiter.h"
#include "agent/supervisor.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"

namespace trainyard::agent {
namespace {

// Wakes the benchmark loop when a task reaches a given state.
class StateWaiter : public TaskListener {
 public:
  void OnTaskStatus(const TaskStatus& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_[status.key.index] = status.state;
    cv_.notify_all();
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    last_.clear();
  }
  void Wait(int index, bool (*done)(TaskState)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return last_.count(index) > 0 && done(last_[index]); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, TaskState> last_;
};

std::string BenchDir() {
  std::string dir = (std::filesystem::temp_directory_path() / absl::StrCat("trainyard-agent-bench-", getpid())).string();
  std::filesystem::create_directories(dir);
  return dir;
}

bool IsRunning(TaskState s) { return s == TaskState::kRunning; }

// state.range(0): 1 = cgroups when writable, 0 = unconfined.
void BM_LaunchToRunning(benchmark::State& state) {
  std::string dir = BenchDir();
  ResourceLimiterPtr limiter = state.range(0) ? DetectResourceLimiter() : NewUnconfinedLimiter();
  StateWaiter waiter;
  RealClock clock;
  auto supervisor = *Supervisor::Create({.data_dir = dir, .clock = &clock, .limiter = limiter.get(), .listener = &waiter});
  int index = 0;
  for (auto _ : state) {
    TaskLaunch l{.key = {.job = "bench", .role = "w", .index = index},
                 .command = {"sleep", "30"},
                 .memory_limit_mb = 256,
                 .kill_grace = absl::Seconds(1)};
    (void)supervisor->Launch(l);
    waiter.Wait(index, IsRunning);
    state.PauseTiming();
    (void)supervisor->Kill(l.key);
    waiter.Wait(index, IsFinal);
    (void)supervisor->Forget(l.key);
    ++index;
    state.ResumeTiming();
  }
  state.SetLabel(LimiterKindName(limiter->kind()));
  supervisor.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LaunchToRunning)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// A node's share of a big job: 250 tasks (`sleep`) launched from 4 threads,
// as the agent's launch queue does, until every one is RUNNING; then all
// killed. state.range(0): 1 = the keeper program (as an agent beside its
// trainyard-keeper), 0 = each keeper a fork of this process; range(1):
// 1 = cgroups when writable, 0 = unconfined.
void BM_LaunchMany(benchmark::State& state) {
  constexpr int kTasks = 250;
  constexpr int kThreads = 4;
  SetKeeperProgramForTest(state.range(0) ? TRAINYARD_KEEPER_PROGRAM : "");
  std::string dir = BenchDir();
  ResourceLimiterPtr limiter = state.range(1) ? DetectResourceLimiter() : NewUnconfinedLimiter();
  StateWaiter waiter;
  RealClock clock;
  auto supervisor = *Supervisor::Create({.data_dir = dir, .clock = &clock, .limiter = limiter.get(), .listener = &waiter});
  int round = 0;
  for (auto _ : state) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = t; i < kTasks; i += kThreads) {
          (void)supervisor->Launch({.key = {.job = absl::StrCat("many", round), .role = "w", .index = i},
                                    .command = {"sleep", "30"},
                                    .memory_limit_mb = 64,
                                    .kill_grace = absl::Seconds(1)});
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kTasks; ++i) waiter.Wait(i, IsRunning);
    state.PauseTiming();
    for (int i = 0; i < kTasks; ++i) (void)supervisor->Kill({.job = absl::StrCat("many", round), .role = "w", .index = i});
    for (int i = 0; i < kTasks; ++i) waiter.Wait(i, IsFinal);
    for (int i = 0; i < kTasks; ++i) (void)supervisor->Forget({.job = absl::StrCat("many", round), .role = "w", .index = i});
    waiter.Clear();
    ++round;
    state.ResumeTiming();
  }
  state.SetLabel(absl::StrCat(state.range(0) ? "keeper program, " : "forked keepers, ", LimiterKindName(limiter->kind())));
  state.counters["tasks_per_s"] = benchmark::Counter(kTasks, benchmark::Counter::kIsIterationInvariantRate);
  supervisor.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LaunchMany)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()->UseRealTime()->Iterations(3);

void BM_LaunchToExit(benchmark::State& state) {
  std::string dir = BenchDir();
  ResourceLimiterPtr limiter = NewUnconfinedLimiter();
  StateWaiter waiter;
  RealClock clock;
  auto supervisor = *Supervisor::Create({.data_dir = dir, .clock = &clock, .limiter = limiter.get(), .listener = &waiter});
  int index = 0;
  for (auto _ : state) {
    TaskLaunch l{.key = {.job = "bench", .role = "t", .index = index}, .command = {"true"}};
    (void)supervisor->Launch(l);
    waiter.Wait(index, IsFinal);
    state.PauseTiming();
    (void)supervisor->Forget(l.key);
    ++index;
    state.ResumeTiming();
  }
  supervisor.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LaunchToExit)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadPortsInUse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadPortsInUse());
}
BENCHMARK(BM_ReadPortsInUse)->Unit(benchmark::kMicrosecond);

// One scrape's rendering on a node with 64 GPUs (the most a node has), half
// of them allocated, and a few HTTP routes counted: its size is reported.
void BM_RenderAgentMetrics(benchmark::State& state) {
  AgentMetricsInput in;
  in.node = "node-0";
  in.gpu_source = "nvml";
  for (int i = 0; i < 64; ++i) {
    in.gpus.push_back({.index = i, .memory_used_mb = 1000 + i, .memory_total_mb = 81920, .utilization_percent = i});
    in.supervisor.gpu_milli[i] = i % 2 ? 1000 : 0;
  }
  in.supervisor.tasks_by_state[2] = 32;
  for (int i = 0; i < 100; ++i) in.supervisor.spawn_seconds.Observe(0.001 * i);
  in.data_dir = DiskSpace{.free_bytes = 1 << 30, .total_bytes = int64_t{1} << 40};
  in.http_requests = {{.method = "GET", .route = "/metrics", .code = 200, .count = 1000}};
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = RenderAgentMetrics(in);
    bytes = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderAgentMetrics)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace trainyard::agent

BENCHMARK_MAIN();
