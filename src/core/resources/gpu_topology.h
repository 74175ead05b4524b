// GpuTopology: how the GPUs of one node are connected — grouped by PCIe
// switch, by NUMA / CPU socket, and by NVLink island where present. Every
// topology is built from group bitmaps (FromGroups), which is what the wire
// carries; the compact spec, `nvidia-smi topo -m` and pairwise link levels
// (NVML) are read into groups and built through it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/gpu_set.h"

namespace trainyard::core {

// The groups of one node's GPUs at each level, as bitmaps (bit i = GPU i).
// Any grouping may be written, contiguous or not ({0,2} is one switch).
struct GpuGroups {
  int gpu_count = 0;
  std::vector<GpuSet> switches;        // empty: one switch per GPU
  std::vector<GpuSet> sockets;         // empty: one socket of every GPU
  std::vector<GpuSet> nvlink_islands;  // empty: no NVLink
};

// How two GPUs of one node are joined over PCIe, closest first: NVML's
// nvmlGpuTopologyLevel_t and the PCIe cells of `nvidia-smi topo -m`.
enum class PcieLink : uint8_t {
  kInternal = 0,          // the same board (a multi-GPU card)
  kSingleSwitch = 1,      // PIX: at most one PCIe switch
  kMultipleSwitches = 2,  // PXB: several switches, no host bridge
  kHostBridge = 3,        // PHB
  kNumaNode = 4,          // NODE: host bridges within one NUMA node
  kSystem = 5,            // SYS / SOC: across sockets
};
// "internal", "PIX", "PXB", "PHB", "NODE" or "SYS".
const char* PcieLinkName(PcieLink link);

// Pairwise links between the GPUs of one node.
struct GpuLinkMatrix {
  // pcie[a][b] for GPUs a != b, n x n; the diagonal is not read.
  std::vector<std::vector<PcieLink>> pcie;
  // Bit b of nvlink[a]: GPUs a and b are joined by NVLink. Empty when not
  // known; else n entries.
  std::vector<uint64_t> nvlink;
};

class GpuTopology {
 public:
  GpuTopology() = default;

  // Every GPU on one switch and one socket (no topology known).
  // REQUIRES: 0 <= gpu_count <= kMaxGpus.
  static GpuTopology Flat(int gpu_count);

  // Builds a topology from group bitmaps, kept exactly as given (then sorted
  // by lowest GPU). Valid when: 0 <= gpu_count <= kMaxGpus; every group is
  // non-empty and inside the node's GPUs; no GPU is in two groups of one
  // level; switches and sockets each cover every GPU; every switch sits
  // inside one socket. NVLink islands need not cover every GPU and may span
  // sockets. An empty `switches` means one switch per GPU and an empty
  // `sockets` one socket, as the spec writes them. Errors name the level and
  // the group by its position in the input: "switches[2] '1+5': GPU 1 is
  // also in switches[0] '0-1'".
  static absl::StatusOr<GpuTopology> FromGroups(GpuGroups groups);

  // Parses "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7[;nvlink=0-3,4-7]"
  // (also "gpus=8" alone, or with groups). Groups are GPU index ranges, and
  // "+" joins ranges into one group ("0-1+4-5" is the group {0,1,4,5}); the
  // groups are then checked as FromGroups does (`nvlink` is its
  // nvlink_islands). The GPU count, when not given, is one past the highest
  // GPU named. Errors name the key and the group.
  static absl::StatusOr<GpuTopology> FromSpec(std::string_view spec);

  // Groups from pairwise links. Sockets: connected components of the links
  // closer than kSystem. Switches: connected components of the links at
  // kSingleSwitch or closer (so never across sockets). NVLink islands: GPUs
  // split greedily, in index order, into groups where every pair is
  // NV-linked; a GPU left alone is in no island. Errors: a matrix that is
  // not square, over kMaxGpus GPUs, or not symmetric (naming the pair).
  static absl::StatusOr<GpuTopology> FromLinkMatrix(const GpuLinkMatrix& links);

  // Parses the matrix printed by `nvidia-smi topo -m` into links, then as
  // FromLinkMatrix. A pair whose NUMA affinity (else CPU affinity), when
  // printed, differs is across sockets. Where NV# hides the PCIe path of a
  // pair, the pair shares a switch when its rows towards every NIC are
  // identical and reach some NIC by PIX or PXB, else is within one NUMA
  // node. Errors name the line that does not parse.
  static absl::StatusOr<GpuTopology> FromNvidiaSmiTopo(std::string_view text);

  int gpu_count() const { return gpu_count_; }
  GpuSet all() const { return GpuSet::FirstN(gpu_count_); }
  const std::vector<GpuSet>& switches() const { return switches_; }
  const std::vector<GpuSet>& sockets() const { return sockets_; }
  const std::vector<GpuSet>& nvlink_islands() const { return nvlink_islands_; }
  // The groups, as FromGroups takes them: FromGroups(groups()) is equal.
  GpuGroups groups() const;

  // Index (into switches() / sockets()) of the group that holds `gpu`.
  // REQUIRES: 0 <= gpu < gpu_count().
  int switch_of(int gpu) const { return gpu_switch_[gpu]; }
  int socket_of(int gpu) const { return gpu_socket_[gpu]; }
  // Index into sockets() of the socket that holds switch `s`.
  int socket_of_switch(int s) const { return switch_socket_[s]; }
  bool has_nvlink() const { return !nvlink_islands_.empty(); }

  // The canonical spec text; FromSpec(ToSpec()) yields an equal topology.
  std::string ToSpec() const;
  bool operator==(const GpuTopology&) const = default;

 private:
  int gpu_count_ = 0;
  std::vector<GpuSet> switches_;
  std::vector<GpuSet> sockets_;
  std::vector<GpuSet> nvlink_islands_;
  // Lookup tables derived from the groups, so that placement needs no
  // search: GPU -> switch, GPU -> socket, switch -> socket.
  std::array<uint8_t, kMaxGpus> gpu_switch_{};
  std::array<uint8_t, kMaxGpus> gpu_socket_{};
  std::array<uint8_t, kMaxGpus> switch_socket_{};
};

// The topology assumed for a node of `gpus` GPUs when nothing describes it
// (a simulated node of `trainyard up`, a trace node without one): GPUs in
// PCIe switches of 2 (the last one alone when the count is odd), switches
// split evenly over 2 sockets when there are 4 or more GPUs; "gpus=0" for
// none. E.g. 8 GPUs: "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7".
// REQUIRES: 0 <= gpus <= kMaxGpus.
std::string DefaultTopologySpec(int gpus);

}  // namespace trainyard::core
