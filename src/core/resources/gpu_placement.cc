// Choosing GPUs on one node.
//
// Count-only requests (mask == 0) for n GPUs, with F the free GPUs:
// 1. Tightness first: if some PCIe switch has >= n free GPUs the choice lies
//    in one switch (kSwitch); else if some socket has >= n, in one socket
//    (kSocket); else anywhere (kNode). A looser level is never chosen while a
//    tighter one is available.
// 2. Fragmentation second — best fit, so the largest free groups survive:
//    - kSwitch: the switch with the FEWEST free GPUs that still fits n; ties
//      go to the switch whose socket has fewer free GPUs (keep emptier
//      sockets whole), then to the lower switch index.
//    - kSocket: the socket with the fewest free GPUs that still fits n (ties:
//      lower index). Inside it, GPUs are taken from the most-used switches
//      first: switches in ascending order of free count (ties: lower index),
//      each emptied completely before the next is touched; only the last
//      switch is split, giving its lowest free GPUs.
//    - kNode: the same most-used-first fill over the whole node: sockets in
//      ascending order of free count, and within each socket its switches in
//      ascending order of free count.
//    Example: switches 0-1,2-3,4-5,6-7 and F = {0,1,2,4,5,6,7}: a 1-GPU
//    request takes GPU 2 (its switch has 1 free), leaving three whole pairs.
//    This maximises, among the choices at the chosen level, the largest
//    number of free GPUs left in one group of that level (one switch for
//    kSwitch, one socket for kSocket and kNode); the property test checks it
//    by brute force.
// 3. NVLink islands, when the topology has them, refine choices within a
//    level without ever loosening it: inside the chosen switch the GPUs come
//    from one island when one island there has >= n free (best fit among
//    islands); at the socket level the candidates socket∩island are tried
//    (best fit) before whole sockets; at the node level one island (best
//    fit) is tried before the whole node.
//
// Locality requests (mask != 0) get exactly the mask or an error.
//
// The count-only path allocates nothing: group counts are popcounts over the
// topology's bitmaps, orders are insertion sorts over small stack arrays.
#include "core/resources/gpu_placement.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {
namespace {

int Pop(uint64_t x) { return BitCount(x); }

uint64_t LowestBits(uint64_t set, int n) { return GpuSet(set).LowestN(n).bits(); }

// An index with a sort key; sorted ascending by (key, index).
struct Ranked {
  int key;
  int index;
};

void InsertionSort(Ranked* items, int count) {
  for (int i = 1; i < count; ++i) {
    Ranked item = items[i];
    int j = i - 1;
    while (j >= 0 && (items[j].key > item.key ||
                      (items[j].key == item.key && items[j].index > item.index))) {
      items[j + 1] = items[j];
      --j;
    }
    items[j + 1] = item;
  }
}

// Takes up to `n` GPUs of `region` inside socket `socket`, most-used switches
// first. Returns the GPUs taken.
uint64_t FillSocket(const GpuTopology& topo, int socket, uint64_t region, int n) {
  Ranked order[kMaxGpus];
  int count = 0;
  uint64_t rest = region & topo.sockets()[socket].bits();
  while (rest != 0) {
    int s = topo.switch_of(__builtin_ctzll(rest));
    uint64_t in_switch = topo.switches()[s].bits() & region;
    order[count++] = {Pop(in_switch), s};
    rest &= ~topo.switches()[s].bits();
  }
  InsertionSort(order, count);
  uint64_t taken = 0;
  for (int i = 0; i < count && n > 0; ++i) {
    uint64_t got = LowestBits(topo.switches()[order[i].index].bits() & region, n);
    taken |= got;
    n -= Pop(got);
  }
  return taken;
}

// Takes `n` GPUs of `region`, most-used sockets first, each filled by
// FillSocket. REQUIRES: region holds at least n GPUs.
uint64_t FillMostUsedFirst(const GpuTopology& topo, uint64_t region, int n) {
  Ranked order[kMaxGpus];
  int count = 0;
  const auto& sockets = topo.sockets();
  for (int k = 0; k < static_cast<int>(sockets.size()); ++k) {
    int c = Pop(sockets[k].bits() & region);
    if (c > 0) order[count++] = {c, k};
  }
  InsertionSort(order, count);
  uint64_t taken = 0;
  for (int i = 0; i < count && n > 0; ++i) {
    uint64_t got = FillSocket(topo, order[i].index, region, n);
    taken |= got;
    n -= Pop(got);
  }
  return taken;
}

// The island (best fit) inside `region` with >= n GPUs; 0 when none.
uint64_t BestIsland(const GpuTopology& topo, uint64_t region, int n) {
  uint64_t best = 0;
  int best_count = kMaxGpus + 1;
  for (GpuSet island : topo.nvlink_islands()) {
    uint64_t in = island.bits() & region;
    int c = Pop(in);
    if (c >= n && c < best_count) {
      best = in;
      best_count = c;
    }
  }
  return best;
}

// The switch (best fit, see the file comment) with >= n free; -1 if none.
int BestSwitch(const GpuTopology& topo, uint64_t free, int n, const int* socket_free) {
  int best = -1, best_count = 0, best_socket_count = 0;
  const auto& switches = topo.switches();
  for (int s = 0; s < static_cast<int>(switches.size()); ++s) {
    int c = Pop(switches[s].bits() & free);
    if (c < n) continue;
    int sc = socket_free[topo.socket_of_switch(s)];
    if (best < 0 || c < best_count || (c == best_count && sc < best_socket_count)) {
      best = s;
      best_count = c;
      best_socket_count = sc;
    }
  }
  return best;
}

// The socket-level choice, or 0 when no socket has n free.
uint64_t ChooseInSocket(const GpuTopology& topo, uint64_t free, int n, const int* socket_free) {
  const auto& sockets = topo.sockets();
  const int socket_count = static_cast<int>(sockets.size());
  if (topo.has_nvlink()) {
    int best = -1, best_count = 0;
    uint64_t best_region = 0;
    for (int k = 0; k < socket_count; ++k) {
      if (socket_free[k] < n) continue;
      uint64_t region = BestIsland(topo, sockets[k].bits() & free, n);
      if (region != 0 && (best < 0 || Pop(region) < best_count)) {
        best = k;
        best_count = Pop(region);
        best_region = region;
      }
    }
    if (best >= 0) return FillSocket(topo, best, best_region, n);
  }
  int best = -1;
  for (int k = 0; k < socket_count; ++k) {
    if (socket_free[k] >= n && (best < 0 || socket_free[k] < socket_free[best])) best = k;
  }
  if (best < 0) return 0;
  return FillSocket(topo, best, sockets[best].bits() & free, n);
}

GpuChoice ChooseCountOnly(const GpuTopology& topo, uint64_t free, int n) {
  int socket_free[kMaxGpus];
  const auto& sockets = topo.sockets();
  for (int k = 0; k < static_cast<int>(sockets.size()); ++k) {
    socket_free[k] = Pop(sockets[k].bits() & free);
  }
  int s = BestSwitch(topo, free, n, socket_free);
  if (s >= 0) {
    uint64_t region = topo.switches()[s].bits() & free;
    uint64_t island = topo.has_nvlink() ? BestIsland(topo, region, n) : 0;
    return {GpuSet(LowestBits(island != 0 ? island : region, n)), Tightness::kSwitch};
  }
  uint64_t in_socket = ChooseInSocket(topo, free, n, socket_free);
  if (in_socket != 0) return {GpuSet(in_socket), Tightness::kSocket};
  uint64_t island = topo.has_nvlink() ? BestIsland(topo, free, n) : 0;
  return {GpuSet(FillMostUsedFirst(topo, island != 0 ? island : free, n)), Tightness::kNode};
}

std::string NodeGpus(const GpuTopology& topo) {
  if (topo.gpu_count() == 0) return "this node has no GPUs";
  return absl::StrCat("this node's GPUs are ", topo.all().ToString());
}

// The InvalidArgument checks shared by both request kinds.
absl::Status CheckRequest(const GpuTopology& topo, int count, uint64_t mask) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("gpus: ", count, " is negative"));
  if (count > topo.gpu_count()) {
    return absl::InvalidArgumentError(absl::StrCat("gpus: ", count, " is more than the node's ",
                                                   topo.gpu_count(), " GPUs"));
  }
  if (mask == 0) return absl::OkStatus();
  GpuSet outside = GpuSet(mask) - topo.all();
  if (!outside.Empty()) {
    return absl::InvalidArgumentError(absl::StrCat("gpu_mask: GPUs ", outside.ToString(),
                                                   " are outside the node; ", NodeGpus(topo)));
  }
  if (count != Pop(mask)) {
    return absl::InvalidArgumentError(absl::StrCat("gpus: ", count, " does not match gpu_mask ",
                                                   GpuSet(mask).ToString(), " (", Pop(mask),
                                                   " GPUs)"));
  }
  return absl::OkStatus();
}

std::string FreeText(GpuSet free) {
  return free.Empty() ? "no GPU is free" : absl::StrCat("free GPUs: ", free.ToString());
}

}  // namespace

const char* TightnessName(Tightness t) {
  switch (t) {
    case Tightness::kNone:
      return "none";
    case Tightness::kSwitch:
      return "switch";
    case Tightness::kSocket:
      return "socket";
    case Tightness::kNode:
      return "node";
  }
  return "unknown";
}

Tightness TightnessOf(const GpuTopology& topo, GpuSet gpus) {
  if (gpus.Empty()) return Tightness::kNone;
  if (!topo.all().ContainsAll(gpus)) return Tightness::kNode;
  int g = gpus.Lowest();
  if (topo.switches()[topo.switch_of(g)].ContainsAll(gpus)) return Tightness::kSwitch;
  if (topo.sockets()[topo.socket_of(g)].ContainsAll(gpus)) return Tightness::kSocket;
  return Tightness::kNode;
}

GpuSet LargestFreeGroup(const GpuTopology& topo, GpuSet free, Tightness level) {
  free = free & topo.all();
  if (level == Tightness::kNode || level == Tightness::kNone) return free;
  const auto& groups = level == Tightness::kSwitch ? topo.switches() : topo.sockets();
  GpuSet best;
  for (GpuSet g : groups) {
    if ((g & free).Count() > best.Count()) best = g & free;
  }
  return best;
}

absl::StatusOr<GpuChoice> ChooseGpus(const GpuTopology& topo, GpuSet free_in, int count,
                                     uint64_t mask) {
  absl::Status invalid = CheckRequest(topo, count, mask);
  if (!invalid.ok()) return invalid;
  const GpuSet free = free_in & topo.all();
  if (mask != 0) {
    GpuSet busy = GpuSet(mask) - free;
    if (!busy.Empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "gpu_mask: GPUs ", busy.ToString(), " of ", GpuSet(mask).ToString(), " are in use; ",
          FreeText(free)));
    }
    return GpuChoice{GpuSet(mask), TightnessOf(topo, GpuSet(mask))};
  }
  if (count == 0) return GpuChoice{};
  if (free.Count() < count) {
    return absl::ResourceExhaustedError(absl::StrCat("needs ", count, " GPUs; ", free.Count(),
                                                     " are free", free.Empty() ? "" : " (GPUs ",
                                                     free.ToString(), free.Empty() ? "" : ")"));
  }
  return ChooseCountOnly(topo, free.bits(), count);
}

bool BestTightness(const GpuTopology& topo, GpuSet free, int count, Tightness* out) {
  if (count < 0 || count > topo.gpu_count()) return false;
  if (count == 0) {
    *out = Tightness::kNone;
    return true;
  }
  const uint64_t f = free.bits() & topo.all().bits();
  if (Pop(f) < count) return false;
  for (GpuSet s : topo.switches()) {
    if (Pop(s.bits() & f) >= count) {
      *out = Tightness::kSwitch;
      return true;
    }
  }
  for (GpuSet k : topo.sockets()) {
    if (Pop(k.bits() & f) >= count) {
      *out = Tightness::kSocket;
      return true;
    }
  }
  *out = Tightness::kNode;
  return true;
}

}  // namespace trainyard::core
