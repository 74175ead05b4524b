// GpuTopology: how the GPUs of one node are connected — grouped by PCIe
// switch, by NUMA / CPU socket, and by NVLink island where present. Built from
// a compact spec or parsed from `nvidia-smi topo -m`.
#pragma once

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
  // (also "gpus=8" alone, or with groups). Groups are GPU index ranges; every
  // GPU 0..n-1 must be in exactly one switch and one socket, and every switch
  // inside one socket. A missing `switches` means one switch per GPU; a
  // missing `sockets` means one socket. Errors name the key and the group.
  static absl::StatusOr<GpuTopology> FromSpec(std::string_view spec);

  // Parses the matrix printed by `nvidia-smi topo -m`. GPUs connected by PIX
  // or PXB (or NV#) share a switch group when PIX; SYS splits sockets
  // (also the "CPU Affinity" / "NUMA Affinity" columns); NV# links form
  // NVLink islands. Errors name the line that does not parse.
  static absl::StatusOr<GpuTopology> FromNvidiaSmiTopo(std::string_view text);

  int gpu_count() const { return gpu_count_; }
  GpuSet all() const { return GpuSet::FirstN(gpu_count_); }
  const std::vector<GpuSet>& switches() const { return switches_; }
  const std::vector<GpuSet>& sockets() const { return sockets_; }
  const std::vector<GpuSet>& nvlink_islands() const { return nvlink_islands_; }

  // The canonical spec text; FromSpec(ToSpec()) yields an equal topology.
  std::string ToSpec() const;
  bool operator==(const GpuTopology&) const = default;

 private:
  int gpu_count_ = 0;
  std::vector<GpuSet> switches_;
  std::vector<GpuSet> sockets_;
  std::vector<GpuSet> nvlink_islands_;
};

}  // namespace trainyard::core
