// Allocation and fragmentation measures of the simulated cluster; see
// cluster_meter.h.
#include "sim/cluster_meter.h"

namespace trainyard::sim {

int TightestLevel(const core::GpuTopology& topo, core::GpuSet free, int count) {
  if (free.Count() < count) return 4;
  for (core::GpuSet s : topo.switches()) {
    if ((free & s).Count() >= count) return 1;
  }
  for (core::GpuSet s : topo.sockets()) {
    if ((free & s).Count() >= count) return 2;
  }
  return 3;
}

int32_t ClusterMeter::Intern(const core::GpuTopology& topo) {
  auto [it, added] = topology_by_spec_.emplace(topo.ToSpec(), topologies_.size());
  if (added) {
    TopologyInfo info{.topology = topo};
    for (int i = 0; i < 2; ++i) info.idle_level[i] = TightestLevel(topo, topo.all(), kSizes[i]);
    topologies_.push_back(std::move(info));
  }
  return it->second;
}

void ClusterMeter::AddNode(int32_t id, const core::GpuTopology& topo) {
  if (id >= static_cast<int32_t>(nodes_.size())) nodes_.resize(id + 1);
  nodes_[id] = NodeMeter{.topology = Intern(topo)};
  total_gpus_ += topo.gpu_count();
  Update(id, topo.all());
}

void ClusterMeter::Update(int32_t id, core::GpuSet free) {
  NodeMeter& n = nodes_[id];
  const TopologyInfo& info = topologies_[n.topology];
  free_gpus_ += free.Count() - n.free;
  n.free = free.Count();
  for (int i = 0; i < 2; ++i) {
    bool counts = info.topology.gpu_count() >= kSizes[i];
    int counted = counts ? n.free : 0;
    int fragmented = 0;
    if (counts && n.free > 0 && TightestLevel(info.topology, free, kSizes[i]) > info.idle_level[i]) {
      fragmented = n.free;
    }
    counted_[i] += counted - n.counted[i];
    fragmented_[i] += fragmented - n.fragmented[i];
    n.counted[i] = counted;
    n.fragmented[i] = fragmented;
  }
}

double ClusterMeter::AllocationRatio() const {
  if (total_gpus_ == 0) return 0;
  return static_cast<double>(total_gpus_ - free_gpus_) / static_cast<double>(total_gpus_);
}

double ClusterMeter::Fragmentation(int i) const {
  if (counted_[i] == 0) return 0;
  return static_cast<double>(fragmented_[i]) / static_cast<double>(counted_[i]);
}

}  // namespace trainyard::sim
