// NodeIndex buckets and the free-GPU shape of a node.
#include "core/state/node_index.h"

#include <algorithm>

namespace trainyard::core {

GpuShape ShapeOf(const GpuTopology& topo, GpuSet free) {
  GpuShape s;
  s.free = free.Count();
  for (GpuSet sw : topo.switches()) s.switch_free = std::max(s.switch_free, (free & sw).Count());
  for (GpuSet so : topo.sockets()) s.socket_free = std::max(s.socket_free, (free & so).Count());
  // A topology without groups (no GPUs) or GPUs outside every group: treat
  // the node as one group so a request can still be served.
  if (topo.switches().empty()) s.switch_free = s.free;
  if (topo.sockets().empty()) s.socket_free = s.free;
  return s;
}

void NodeIndex::InsertKey(int32_t node, Key k) {
  if (node >= static_cast<int32_t>(pos_.size())) {
    pos_.resize(node + 1, -1);
    key_.resize(node + 1, 0);
  }
  std::vector<int32_t>& bucket = buckets_[k];
  key_[node] = k;
  pos_[node] = static_cast<int32_t>(bucket.size());
  bucket.push_back(node);
  ++size_;
}

void NodeIndex::Remove(int32_t node) {
  if (!Contains(node)) return;
  auto it = buckets_.find(key_[node]);
  std::vector<int32_t>& bucket = it->second;
  int32_t pos = pos_[node];
  int32_t last = bucket.back();
  bucket[pos] = last;
  pos_[last] = pos;
  bucket.pop_back();
  pos_[node] = -1;
  if (bucket.empty()) buckets_.erase(it);
  --size_;
}

void NodeIndex::Update(int32_t node, GpuShape s) { UpdateKey(node, KeyOf(s)); }

void NodeIndex::UpdateKey(int32_t node, Key k) {
  if (Contains(node) && key_[node] == k) return;
  Remove(node);
  InsertKey(node, k);
}

}  // namespace trainyard::core
