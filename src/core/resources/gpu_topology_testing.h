// Test helper: random valid GPU groupings, seeded by the caller, with groups
// that are seldom contiguous ranges (GPUs are shuffled before they are cut
// into sockets, switches and NVLink islands). Used by core and wire tests.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "core/resources/gpu_topology.h"

namespace trainyard::core::testing {

// The GPUs order[begin, end) as a set.
inline GpuSet SetOf(const std::vector<int>& order, size_t begin, size_t end) {
  uint64_t bits = 0;
  for (size_t i = begin; i < end; ++i) bits |= uint64_t{1} << order[i];
  return GpuSet(bits);
}

// Cuts order[begin, end) into runs of 1..max_size GPUs, calling `take` with
// each run's bounds.
template <typename Take>
void CutRuns(std::mt19937& rng, size_t begin, size_t end, size_t max_size, Take take) {
  while (begin < end) {
    size_t size = 1 + rng() % std::min(max_size, end - begin);
    take(begin, begin + size);
    begin += size;
  }
}

// Random groups that FromGroups accepts: 0..64 GPUs; each socket a random
// subset, each switch a random subset of one socket; NVLink islands of 2..8
// GPUs over part of the node, spanning sockets as they fall. Groups are in
// no particular order.
inline GpuGroups RandomGpuGroups(std::mt19937& rng) {
  GpuGroups g{.gpu_count = static_cast<int>(rng() % (kMaxGpus + 1))};
  const size_t n = g.gpu_count;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  CutRuns(rng, 0, n, 1 + n / 2, [&](size_t b, size_t e) {
    g.sockets.push_back(SetOf(order, b, e));
    CutRuns(rng, b, e, 4, [&](size_t sb, size_t se) { g.switches.push_back(SetOf(order, sb, se)); });
  });
  std::shuffle(order.begin(), order.end(), rng);
  CutRuns(rng, 0, n, 8, [&](size_t b, size_t e) {
    if (e - b >= 2 && rng() % 2 == 0) g.nvlink_islands.push_back(SetOf(order, b, e));
  });
  std::shuffle(g.switches.begin(), g.switches.end(), rng);
  return g;
}

}  // namespace trainyard::core::testing
