// Benchmarks of `trainyard sim`: filling a synthetic 10,000-node x 8-GPU
// cluster (single-GPU tasks, and 8-task gangs of 4-GPU tasks), and replaying
// the Alibaba openb trace when ../shared/traces is present. Counters:
// placements_per_s and decisions_per_s (wall time inside Schedule) and
// sim_wall_s (the whole replay, input already in memory).
#include <string>

#include "benchmark/benchmark.h"
#include "sim/simulator.h"
#include "sim/synthetic.h"
#include "sim/test_paths.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

void Report(benchmark::State& state, const SimReport& r) {
  state.counters["placements_per_s"] = r.PlacementsPerSecond();
  state.counters["decisions_per_s"] = r.DecisionsPerSecond();
  state.counters["tasks_placed"] = static_cast<double>(r.tasks_placed);
  state.counters["sim_wall_s"] = r.sim_wall_s;
  state.counters["gpu_alloc_peak"] = r.gpu_alloc_peak;
}

// Args: gang size, GPUs per task.
void BM_SyntheticFill(benchmark::State& state) {
  SyntheticOptions o{.nodes = 10000, .gpus_per_node = 8, .tasks = 100000,
                     .gang = static_cast<int>(state.range(0)),
                     .gpus_per_task = static_cast<int>(state.range(1))};
  NodeList nodes = SyntheticNodes(o);
  Trace trace = SyntheticTrace(o);
  for (auto _ : state) {
    auto r = Simulate(nodes, trace, SimOptions{});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    Report(state, *r);
  }
}
BENCHMARK(BM_SyntheticFill)->Args({1, 1})->Args({8, 4})->Unit(benchmark::kMillisecond)->Iterations(1);

// Arg: 0 = openb_pod_list_default.csv, 1 = the same with --fill (end times
// ignored), 2 = openb_pod_list_multigpu50.csv (no end times: fills too).
void BM_OpenbReplay(benchmark::State& state) {
  std::string dir = OpenbDirForTest();
  if (dir.empty()) {
    state.SkipWithError("../shared/traces/alibaba-openb is absent");
    return;
  }
  auto nodes = ReadNodeList(dir + "/openb_node_list_gpu_node.csv");
  auto trace = ReadTrace(dir + (state.range(0) < 2 ? "/openb_pod_list_default.csv"
                                                   : "/openb_pod_list_multigpu50.csv"));
  SimOptions options;
  options.fill = state.range(0) == 1;
  if (!nodes.ok() || !trace.ok()) {
    state.SkipWithError("cannot read the openb trace");
    return;
  }
  for (auto _ : state) {
    auto r = Simulate(*nodes, *trace, options);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    Report(state, *r);
  }
}
BENCHMARK(BM_OpenbReplay)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_OpenbReplay)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace trainyard::sim

BENCHMARK_MAIN();
