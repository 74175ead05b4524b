// NodeIndex: schedulable nodes bucketed by the shape of their free GPUs —
// (largest free group under one PCIe switch, largest under one socket,
// free count) — so a placement visits only buckets that can serve it, in
// best-fit order, instead of scanning every node. Updates are O(log buckets).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::core {

// The free-GPU shape of a node.
struct GpuShape {
  int switch_free = 0;  // most free GPUs under one switch
  int socket_free = 0;  // most free GPUs under one socket
  int free = 0;         // free GPUs in all
  bool operator==(const GpuShape&) const = default;
};

// Computes the shape of `free` on a node of topology `topo`.
GpuShape ShapeOf(const GpuTopology& topo, GpuSet free);

class NodeIndex {
 public:
  using Key = uint32_t;
  using Buckets = std::map<Key, std::vector<int32_t>>;

  // Key order is (switch_free, socket_free, free) ascending.
  static Key KeyOf(GpuShape s) {
    return static_cast<Key>((s.switch_free * 65 + s.socket_free) * 65 + s.free);
  }
  static GpuShape ShapeOfKey(Key k) {
    return GpuShape{static_cast<int>(k / (65 * 65)), static_cast<int>(k / 65 % 65),
                    static_cast<int>(k % 65)};
  }

  // Adds node n (REQUIRES: not in the index) with shape s.
  void Insert(int32_t node, GpuShape s) { InsertKey(node, KeyOf(s)); }
  void InsertKey(int32_t node, Key k);
  // Removes node n if present.
  void Remove(int32_t node);
  // Moves node n to the bucket of shape s (inserting it when absent).
  void Update(int32_t node, GpuShape s);
  // The same with a key of the caller's own (an index keyed otherwise).
  void UpdateKey(int32_t node, Key k);
  bool Contains(int32_t node) const {
    return node < static_cast<int32_t>(pos_.size()) && pos_[node] >= 0;
  }
  // Non-empty buckets in key order.
  const Buckets& buckets() const { return buckets_; }
  size_t size() const { return size_; }

 private:
  Buckets buckets_;
  std::vector<Key> key_;
  std::vector<int32_t> pos_;
  size_t size_ = 0;
};

}  // namespace trainyard::core
