// GpuTopology: how the GPUs of one node are connected — grouped by PCIe
// switch, by NUMA / CPU socket, and by NVLink island where present. Built from
// a compact spec or parsed from `nvidia-smi topo -m`.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/gpu_set.h"

namespace trainyard::core {

class GpuTopology {
 public:
  GpuTopology() = default;

  // Every GPU on one switch and one socket (no topology known).
  // REQUIRES: 0 <= gpu_count <= kMaxGpus.
  static GpuTopology Flat(int gpu_count);

  // Parses "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7[;nvlink=0-3,4-7]"
  // (also "gpus=8" alone, or with groups). Groups are GPU index ranges, and
  // "+" joins ranges into one group ("0-1+4-5" is the group {0,1,4,5}); every
  // GPU 0..n-1 must be in exactly one switch and one socket, and every switch
  // inside one socket. A missing `switches` means one switch per GPU; a
  // missing `sockets` means one socket. NVLink islands must be disjoint but
  // need not cover every GPU. Groups are kept sorted by their lowest GPU.
  // Errors name the key and the group.
  static absl::StatusOr<GpuTopology> FromSpec(std::string_view spec);

  // Parses the matrix printed by `nvidia-smi topo -m`. Sockets: GPUs joined
  // by any link but SYS/SOC and with the same NUMA affinity (else the same
  // CPU affinity) when those columns are printed. Switches: GPUs of one
  // socket joined by PIX; where NV# hides the PCIe path of a pair, the pair
  // shares a switch when its rows towards every NIC are identical and reach
  // some NIC by PIX or PXB. NVLink islands: GPUs split greedily, in index
  // order, into groups where every pair is joined by NV#. Errors name the
  // line that does not parse.
  static absl::StatusOr<GpuTopology> FromNvidiaSmiTopo(std::string_view text);

  int gpu_count() const { return gpu_count_; }
  GpuSet all() const { return GpuSet::FirstN(gpu_count_); }
  const std::vector<GpuSet>& switches() const { return switches_; }
  const std::vector<GpuSet>& sockets() const { return sockets_; }
  const std::vector<GpuSet>& nvlink_islands() const { return nvlink_islands_; }

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
  // Validates the groups (every GPU in one switch and one socket, switches
  // inside sockets, islands disjoint), sorts them by lowest GPU and fills
  // the lookup tables. `what` prefixes error messages.
  static absl::StatusOr<GpuTopology> Build(int gpu_count, std::vector<GpuSet> switches,
                                           std::vector<GpuSet> sockets,
                                           std::vector<GpuSet> islands, std::string_view what);

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

}  // namespace trainyard::core
