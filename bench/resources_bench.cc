// Benchmarks of the resource model: count-only GPU placement on 8- and
// 64-GPU nodes with topology, a locality request, the tightness probe used to
// rank nodes, and PortRanges take-N on a fragmented set. Free masks vary over
// a precomputed array so the branch predictor cannot learn one answer.
// Target: a count-only placement on an 8-GPU node under 100 ns median.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/resources/gpu_placement.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/node_resources.h"
#include "core/resources/port_ranges.h"

// Counts heap allocations so the placement benchmarks can show that the hot
// path makes none (reported as the allocs_per_op counter). GCC cannot see
// that the replaced operator new pairs with this operator delete.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<uint64_t> g_allocations{0};

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace trainyard::core {
namespace {

constexpr int kCases = 1024;  // a power of two: the index wraps with a mask

struct Case {
  GpuSet free;
  int count;
  uint64_t mask;
};

// Realistic partly-used nodes: each GPU busy with probability `busy`, and a
// request of a size the free GPUs can serve (from `sizes`).
std::vector<Case> MakeCases(int gpus, double busy, const std::vector<int>& sizes, bool locality) {
  std::mt19937_64 rng(42);
  std::bernoulli_distribution used(busy);
  std::vector<Case> cases;
  while (static_cast<int>(cases.size()) < kCases) {
    uint64_t free = 0;
    for (int g = 0; g < gpus; ++g) {
      if (!used(rng)) free |= uint64_t{1} << g;
    }
    int count = sizes[rng() % sizes.size()];
    if (__builtin_popcountll(free) < count) continue;
    uint64_t mask = 0;
    if (locality) mask = GpuSet(free).LowestN(count).bits();
    cases.push_back({GpuSet(free), count, mask});
  }
  return cases;
}

GpuTopology Topo(const char* spec) { return *GpuTopology::FromSpec(spec); }

const char k64[] =
    "switches=0-3,4-7,8-11,12-15,16-19,20-23,24-27,28-31,32-35,36-39,40-43,44-47,48-51,52-55,"
    "56-59,60-63;sockets=0-15,16-31,32-47,48-63";

void RunChoose(benchmark::State& state, const GpuTopology& topo, const std::vector<Case>& cases) {
  size_t i = 0;
  const uint64_t allocations_before = g_allocations.load();
  for (auto _ : state) {
    const Case& c = cases[i++ & (kCases - 1)];
    absl::StatusOr<GpuChoice> choice = ChooseGpus(topo, c.free, c.count, c.mask);
    benchmark::DoNotOptimize(choice);
  }
  state.counters["allocs_per_op"] = benchmark::Counter(
      static_cast<double>(g_allocations.load() - allocations_before),
      benchmark::Counter::kAvgIterations);
}

void BM_ChooseGpusCountOnly8(benchmark::State& state) {
  GpuTopology topo = Topo("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7");
  RunChoose(state, topo, MakeCases(8, 0.4, {1, 1, 2, 2, 4}, false));
}
BENCHMARK(BM_ChooseGpusCountOnly8);

void BM_ChooseGpusCountOnly8Nvlink(benchmark::State& state) {
  GpuTopology topo = Topo("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7;nvlink=0-3,4-7");
  RunChoose(state, topo, MakeCases(8, 0.4, {1, 1, 2, 2, 4}, false));
}
BENCHMARK(BM_ChooseGpusCountOnly8Nvlink);

void BM_ChooseGpusCountOnly64(benchmark::State& state) {
  GpuTopology topo = Topo(k64);
  RunChoose(state, topo, MakeCases(64, 0.5, {1, 2, 4, 8, 16}, false));
}
BENCHMARK(BM_ChooseGpusCountOnly64);

void BM_ChooseGpusLocality8(benchmark::State& state) {
  GpuTopology topo = Topo("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7");
  RunChoose(state, topo, MakeCases(8, 0.4, {1, 2, 4}, true));
}
BENCHMARK(BM_ChooseGpusLocality8);

void BM_BestTightness8(benchmark::State& state) {
  GpuTopology topo = Topo("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7");
  std::vector<Case> cases = MakeCases(8, 0.4, {1, 1, 2, 2, 4}, false);
  size_t i = 0;
  for (auto _ : state) {
    const Case& c = cases[i++ & (kCases - 1)];
    Tightness t;
    benchmark::DoNotOptimize(BestTightness(topo, c.free, c.count, &t));
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_BestTightness8);

// A whole task request (memory, vcores, GPUs, 2 ports) on a partly used node.
void BM_PlaceOnNode8(benchmark::State& state) {
  Resource capacity;
  capacity.memory_mb = 512 * 1024;
  capacity.vcores_milli = 64 * 1000;
  capacity.gpus = 8;
  capacity.ports = *PortRanges::Of(30000, 40000);
  GpuTopology topo = Topo("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7");
  std::vector<NodeResources> nodes;
  std::vector<Case> cases = MakeCases(8, 0.4, {1, 1, 2, 2, 4}, false);
  for (const Case& c : cases) {
    NodeResources node = *NodeResources::Create(capacity, topo);
    node.free.gpu_mask = c.free.bits();
    node.free.gpus = c.free.Count();
    nodes.push_back(node);
  }
  Resource request;
  request.memory_mb = 16 * 1024;
  request.vcores_milli = 4000;
  request.port_count = 2;
  size_t i = 0;
  for (auto _ : state) {
    size_t k = i++ & (kCases - 1);
    request.gpus = cases[k].count;
    absl::StatusOr<TaskPlacement> p = PlaceOnNode(nodes[k], request);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PlaceOnNode8);

// 1000 ranges of 10 ports with gaps of 5: 10000..24994.
PortRanges Fragmented() {
  PortRanges ports;
  for (uint32_t r = 0; r < 1000; ++r) ports.Add({10000 + r * 15, 10000 + r * 15 + 9});
  return ports;
}

void BM_PortRangesTakeLowest(benchmark::State& state) {
  PortRanges ports = Fragmented();
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    std::optional<PortRanges> taken = ports.TakeLowest(n);
    benchmark::DoNotOptimize(taken);
  }
  state.SetLabel("1000 ranges");
}
BENCHMARK(BM_PortRangesTakeLowest)->Arg(4)->Arg(5000);

void BM_PortRangesTakeAndSubtract(benchmark::State& state) {
  PortRanges ports = Fragmented();
  for (auto _ : state) {
    PortRanges taken = *ports.TakeLowest(4);
    PortRanges left = ports.Subtract(taken);
    benchmark::DoNotOptimize(left);
  }
  state.SetLabel("1000 ranges");
}
BENCHMARK(BM_PortRangesTakeAndSubtract);

}  // namespace
}  // namespace trainyard::core

BENCHMARK_MAIN();
