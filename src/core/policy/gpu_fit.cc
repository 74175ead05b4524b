// Best-fit GPU selection by topology level.
#include "core/policy/gpu_fit.h"

#include <algorithm>
#include <vector>

namespace trainyard::core {
namespace {

// Index of the group with the fewest free GPUs that still holds `count`
// (ties: lowest index), or -1.
int BestFitGroup(const std::vector<GpuSet>& groups, GpuSet free, int count) {
  int best = -1;
  int best_free = kMaxGpus + 1;
  for (size_t i = 0; i < groups.size(); ++i) {
    int f = (groups[i] & free).Count();
    if (f >= count && f < best_free) {
      best = static_cast<int>(i);
      best_free = f;
    }
  }
  return best;
}

// Takes `count` GPUs from `pool` switch by switch, fullest switch first, so
// the choice spans as few switches as possible.
GpuSet TakeBySwitch(const std::vector<GpuSet>& switches, GpuSet pool, int count) {
  GpuSet taken;
  while (count > 0) {
    int best = -1;
    int best_free = 0;
    for (size_t i = 0; i < switches.size(); ++i) {
      int f = (switches[i] & pool).Count();
      if (f > best_free) {
        best = static_cast<int>(i);
        best_free = f;
      }
    }
    if (best < 0) {
      // GPUs outside every switch group: take the lowest.
      GpuSet rest = pool.LowestN(count);
      return taken | rest;
    }
    GpuSet part = (switches[best] & pool).LowestN(count);
    taken = taken | part;
    pool = pool - part;
    count -= part.Count();
  }
  return taken;
}

}  // namespace

bool FitGpus(const GpuTopology& topo, GpuSet free, int count, uint64_t mask, Tightness loosest,
             GpuFit* out) {
  if (mask != 0) {
    GpuSet want(mask);
    if (!free.ContainsAll(want)) return false;
    Tightness t = TightnessOf(topo, want);
    if (t > loosest) return false;
    *out = GpuFit{want, t};
    return true;
  }
  if (count <= 0) {
    *out = GpuFit{};
    return true;
  }
  if (free.Count() < count) return false;
  int sw = BestFitGroup(topo.switches(), free, count);
  if (sw >= 0) {
    *out = GpuFit{(topo.switches()[sw] & free).LowestN(count), Tightness::kSwitch};
    return true;
  }
  if (loosest == Tightness::kSwitch) return false;
  int so = BestFitGroup(topo.sockets(), free, count);
  if (so >= 0) {
    GpuSet pool = topo.sockets()[so] & free;
    *out = GpuFit{TakeBySwitch(topo.switches(), pool, count), Tightness::kSocket};
    return true;
  }
  if (loosest == Tightness::kSocket) return false;
  GpuSet taken;
  int left = count;
  GpuSet pool = free;
  while (left > 0) {
    int best = -1;
    int best_free = 0;
    for (size_t i = 0; i < topo.sockets().size(); ++i) {
      int f = (topo.sockets()[i] & pool).Count();
      if (f > best_free) {
        best = static_cast<int>(i);
        best_free = f;
      }
    }
    GpuSet from = best < 0 ? pool : topo.sockets()[best] & pool;
    int n = std::min(left, from.Count());
    GpuSet part = TakeBySwitch(topo.switches(), from, n);
    taken = taken | part;
    pool = pool - part;
    left -= part.Count();
  }
  *out = GpuFit{taken, Tightness::kNode};
  return true;
}

namespace {

bool MemoryFits(const NodeState& node, int g, int64_t memory_mb) {
  if (memory_mb == 0 || node.gpu_memory_mb == 0) return true;
  int64_t used = node.share_memory_used.empty() ? 0 : node.share_memory_used[g];
  return node.gpu_memory_mb - used >= memory_mb;
}

}  // namespace

int FitShare(const GpuTopology& topo, const NodeState& node, int milli, int64_t memory_mb) {
  int best = -1;
  int best_free = 1001;
  for (uint64_t m = node.shared & ~node.excluded; m != 0; m &= m - 1) {
    int g = __builtin_ctzll(m);
    int free = 1000 - node.share_used[g];
    if (free >= milli && free < best_free && MemoryFits(node, g, memory_mb)) {
      best = g;
      best_free = free;
    }
  }
  if (best >= 0) return best;
  bool whole_memory_fits = memory_mb == 0 || node.gpu_memory_mb == 0 || node.gpu_memory_mb >= memory_mb;
  if (node.free.gpu_mask == 0 || !whole_memory_fits) return -1;
  GpuFit fit;
  if (!FitGpus(topo, GpuSet(node.free.gpu_mask), 1, 0, Tightness::kNode, &fit)) return -1;
  return __builtin_ctzll(fit.gpus.bits());
}

int SharesFitting(const NodeState& node, int milli, int64_t memory_mb) {
  int n = 0;
  for (uint64_t m = node.shared & ~node.excluded; m != 0; m &= m - 1) {
    int g = __builtin_ctzll(m);
    if (MemoryFits(node, g, memory_mb)) n += (1000 - node.share_used[g]) / milli;
  }
  int per_gpu = 1000 / milli;
  if (memory_mb > 0 && node.gpu_memory_mb > 0) {
    per_gpu = std::min<int64_t>(per_gpu, node.gpu_memory_mb / memory_mb);
  }
  return n + node.free.gpus * per_gpu;
}

const char* TightnessPhrase(Tightness t) {
  switch (t) {
    case Tightness::kSwitch:
      return "under one PCIe switch";
    case Tightness::kSocket:
      return "under one socket";
    case Tightness::kNode:
      return "on one node";
    case Tightness::kNone:
      return "";
  }
  return "";
}

}  // namespace trainyard::core
