// ClusterMeter: the simulator's running measure of the cluster — GPUs
// allocated, and fragmentation: the share of free GPUs that cannot serve a
// 4-GPU (or 8-GPU) request as tightly as an idle node of their kind could
// (one switch, else one socket, else the node). Nodes with fewer GPUs than
// the request do not count. Each update costs O(the node's topology).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::sim {

class ClusterMeter {
 public:
  // The request sizes fragmentation is measured for.
  static constexpr int kSizes[2] = {4, 8};

  // Adds node `id` (any non-negative key) of topology `topo`, all free.
  void AddNode(int32_t id, const core::GpuTopology& topo);
  // Node `id`'s free GPUs are now `free`. REQUIRES: AddNode(id) was called.
  void Update(int32_t id, core::GpuSet free);

  int64_t total_gpus() const { return total_gpus_; }
  int64_t free_gpus() const { return free_gpus_; }
  // Allocated / total GPUs; 0 for a cluster without GPUs.
  double AllocationRatio() const;
  // Fragmentation for kSizes[i]; 0 when no free GPU counts.
  double Fragmentation(int i) const;

 private:
  struct NodeMeter {
    int32_t topology = 0;  // index into topologies_
    int free = 0;
    int counted[2] = {0, 0};     // free GPUs that count for size i
    int fragmented[2] = {0, 0};  // of those, the ones that cannot serve it
  };
  struct TopologyInfo {
    core::GpuTopology topology;
    int idle_level[2] = {0, 0};
  };
  int32_t Intern(const core::GpuTopology& topo);

  std::vector<TopologyInfo> topologies_;
  absl::flat_hash_map<std::string, int32_t> topology_by_spec_;
  std::vector<NodeMeter> nodes_;
  int64_t total_gpus_ = 0;
  int64_t free_gpus_ = 0;
  int64_t counted_[2] = {0, 0};
  int64_t fragmented_[2] = {0, 0};
};

// How tightly `count` of the GPUs in `free` can be chosen on a node of
// `topo`: 1 = one switch, 2 = one socket, 3 = the node, 4 = not at all.
int TightestLevel(const core::GpuTopology& topo, core::GpuSet free, int count);

}  // namespace trainyard::sim
