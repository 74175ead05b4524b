// Benchmarks of the scheduler core on a 10,000-node x 8-GPU cluster (two
// sockets, four PCIe switches of two GPUs per node), one core:
//  - single-GPU task placements per second, topology-aware (target >= 200,000/s);
//  - quarter-GPU share placements per second, four to a GPU (target >= 200,000/s);
//  - 8-task gangs of 4-GPU tasks, tasks per second (target >= 20,000/s);
//  - the three fills again through the "fragmentation" placement, and its
//    single-GPU and share fills on 50,000 nodes;
//  - one preemption decision for a 64-GPU production gang on a full cluster
//    (target < 10 ms);
//  - scheduler-state memory per node and per pending task, counted by a
//    counting operator new in this program (target < 1 KiB each).
// Run: build/<dir>/bench/scheduler_bench --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "core/policy/preemption.h"
#include "core/scheduler/scheduler.h"

// Live heap bytes of this program: every allocation carries its size.
namespace {
std::atomic<int64_t> g_live_bytes{0};
constexpr size_t kHeader = 16;
}  // namespace

void* operator new(size_t size) {
  void* p = std::malloc(size + kHeader);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(p) = size;
  g_live_bytes.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
  return static_cast<char*>(p) + kHeader;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - kHeader;
  g_live_bytes.fetch_sub(static_cast<int64_t>(*reinterpret_cast<size_t*>(base)),
                         std::memory_order_relaxed);
  std::free(base);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace trainyard::core {
namespace {

constexpr int kNodes = 10000;
constexpr char kTopology[] = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7";

absl::Time T(int s) { return absl::UnixEpoch() + absl::Seconds(s); }

std::unique_ptr<Scheduler> MakeCluster(const std::string& placement = "topology", int nodes = kNodes) {
  SchedulerOptions options;
  options.placement = placement;
  auto s = Scheduler::Create(options).value();
  GpuTopology topo = GpuTopology::FromSpec(kTopology).value();
  for (int i = 0; i < nodes; ++i) {
    NodeSpec n;
    n.name = absl::StrCat("node-", i);
    n.rack = absl::StrCat("rack-", i / 40);
    n.capacity = Resource{.memory_mb = 1024 * 1024, .vcores_milli = 96000, .gpus = 8};
    n.topology = topo;
    if (!s->AddNode(n).ok()) std::abort();
  }
  return s;
}

JobRequest Job(int id, int tasks, int gpus, PriorityClass p, int submit, int milli = 0) {
  JobRequest job;
  job.id = absl::StrCat("job-", id);
  job.user = "bench";
  job.priority = p;
  job.submit_time = T(submit);
  RoleRequest role;
  role.name = "worker";
  role.count = tasks;
  role.resource = Resource{.memory_mb = 8192, .vcores_milli = 4000, .gpus = gpus};
  if (milli > 0) {
    // 32 shares fill a node: CPU must not run out first.
    role.resource = Resource{.memory_mb = 8192, .vcores_milli = 2000, .gpu_milli = milli};
  }
  job.roles.push_back(role);
  return job;
}

// Fills the cluster with `jobs` jobs of `tasks` x `gpus` (or, with milli, of
// one share of a GPU each) in one round and reports tasks placed per second
// of Schedule().
void RunFill(benchmark::State& state, int tasks, int gpus, int milli = 0,
             const std::string& placement = "topology", int nodes = kNodes) {
  int jobs = milli > 0 ? nodes * 8 * (1000 / milli) : nodes * 8 / (tasks * gpus);
  int64_t placed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto s = MakeCluster(placement, nodes);
    for (int i = 0; i < jobs; ++i) {
      if (!s->AddJob(Job(i, tasks, gpus, PriorityClass::kIteration, i, milli)).ok()) std::abort();
    }
    state.ResumeTiming();
    Decisions d = s->Schedule(T(jobs + 1));
    state.PauseTiming();
    for (const JobPlacement& p : d.placements) placed += static_cast<int64_t>(p.tasks.size());
    if (d.placements.size() != static_cast<size_t>(jobs)) {
      state.SkipWithError("not every job was placed");
    }
    s.reset();
    state.ResumeTiming();
  }
  state.counters["tasks_per_s"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
}

void BM_SingleGpuPlacements(benchmark::State& state) { RunFill(state, 1, 1); }
BENCHMARK(BM_SingleGpuPlacements)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_QuarterGpuSharePlacements(benchmark::State& state) { RunFill(state, 1, 0, 250); }
BENCHMARK(BM_QuarterGpuSharePlacements)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_Gang8x4GpuPlacements(benchmark::State& state) { RunFill(state, 8, 4); }
BENCHMARK(BM_Gang8x4GpuPlacements)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// The same fills through the "fragmentation" placement, which scores every
// node that fits.
void BM_SingleGpuPlacementsFragmentation(benchmark::State& state) {
  RunFill(state, 1, 1, 0, "fragmentation");
}
BENCHMARK(BM_SingleGpuPlacementsFragmentation)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_QuarterGpuSharePlacementsFragmentation(benchmark::State& state) {
  RunFill(state, 1, 0, 250, "fragmentation");
}
BENCHMARK(BM_QuarterGpuSharePlacementsFragmentation)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_Gang8x4GpuPlacementsFragmentation(benchmark::State& state) {
  RunFill(state, 8, 4, 0, "fragmentation");
}
BENCHMARK(BM_Gang8x4GpuPlacementsFragmentation)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// Fragmentation fills of 50,000 nodes (400,000 single-GPU tasks; 1,600,000
// quarter shares): the cost of a placement as the cluster grows five times.
constexpr int kLargeNodes = 50000;
void BM_SingleGpuPlacementsFragmentation50k(benchmark::State& state) {
  RunFill(state, 1, 1, 0, "fragmentation", kLargeNodes);
}
BENCHMARK(BM_SingleGpuPlacementsFragmentation50k)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_QuarterGpuSharePlacementsFragmentation50k(benchmark::State& state) {
  RunFill(state, 1, 0, 250, "fragmentation", kLargeNodes);
}
BENCHMARK(BM_QuarterGpuSharePlacementsFragmentation50k)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

// A full cluster of ptr and iteration jobs of 1, 2 and 4 GPUs; one
// production gang of 16 x 4 GPUs arrives. Times the round that chooses
// its victims.
void BM_PreemptionDecision64Gpu(benchmark::State& state) {
  size_t victims = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto s = MakeCluster();
    int id = 0;
    for (int n = 0; n < kNodes; ++n) {
      for (int gpus : {4, 2, 1, 1}) {
        PriorityClass p = id % 3 == 0 ? PriorityClass::kIteration : PriorityClass::kPtr;
        if (!s->AddJob(Job(id, 1, gpus, p, id)).ok()) std::abort();
        ++id;
      }
    }
    s->Schedule(T(id));
    if (!s->AddJob(Job(id, 16, 4, PriorityClass::kProduction, id + 100)).ok()) std::abort();
    state.ResumeTiming();
    Decisions d = s->Schedule(T(id + 200));
    state.PauseTiming();
    victims = d.preemptions.size();
    if (victims == 0) state.SkipWithError("no preemption decided");
    s.reset();
    state.ResumeTiming();
  }
  state.counters["victims"] = static_cast<double>(victims);
}
BENCHMARK(BM_PreemptionDecision64Gpu)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

// The victim search alone, repeated on one full cluster (the search leaves
// the state as it found it).
void BM_VictimSearchOnly64Gpu(benchmark::State& state) {
  auto s = MakeCluster();
  int id = 0;
  for (int n = 0; n < kNodes; ++n) {
    for (int gpus : {4, 2, 1, 1}) {
      PriorityClass p = id % 3 == 0 ? PriorityClass::kIteration : PriorityClass::kPtr;
      if (!s->AddJob(Job(id, 1, gpus, p, id)).ok()) std::abort();
      ++id;
    }
  }
  s->Schedule(T(id));
  if (!s->AddJob(Job(id, 16, 4, PriorityClass::kProduction, id + 100)).ok()) std::abort();
  // A copy: the search writes the state tentatively, and only the scheduler
  // may write its own.
  ClusterState cs = s->state();
  JobSlot j = *cs.FindJob(absl::StrCat("job-", id));
  auto placement = MakePlacementPolicy("topology").value();
  GangPlacer placer(&cs, placement.get());
  size_t victims = 0;
  for (auto _ : state) {
    auto choice = ChooseVictims(
        &cs, &placer, j,
        [](const JobBrief& v) { return v.priority < PriorityClass::kProduction; },
        T(id + 200));
    victims = choice.has_value() ? choice->victims.size() : 0;
  }
  state.counters["victims"] = static_cast<double>(victims);
}
BENCHMARK(BM_VictimSearchOnly64Gpu)->Unit(benchmark::kMillisecond)->UseRealTime();

// Heap bytes of the scheduler per node (empty cluster) and per pending
// single-task job.
void BM_MemoryPerNodeAndTask(benchmark::State& state) {
  double per_node = 0, per_task = 0;
  for (auto _ : state) {
    int64_t before = g_live_bytes.load();
    auto s = MakeCluster();
    int64_t with_nodes = g_live_bytes.load();
    constexpr int kJobs = 100000;
    for (int i = 0; i < kJobs; ++i) {
      if (!s->AddJob(Job(i, 1, 1, PriorityClass::kIteration, i)).ok()) std::abort();
    }
    int64_t with_jobs = g_live_bytes.load();
    per_node = double(with_nodes - before) / kNodes;
    per_task = double(with_jobs - with_nodes) / kJobs;
    benchmark::DoNotOptimize(s);
  }
  state.counters["bytes_per_node"] = per_node;
  state.counters["bytes_per_pending_task"] = per_task;
  std::printf("scheduler state: %.0f bytes/node, %.0f bytes/pending task\n", per_node, per_task);
}
BENCHMARK(BM_MemoryPerNodeAndTask)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace trainyard::core

BENCHMARK_MAIN();
