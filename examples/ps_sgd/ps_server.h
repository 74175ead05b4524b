// The parameter server of the example: holds one shard (a contiguous slice)
// of the parameter vector, restores it from the job's checkpoint on start,
// and serves PULL / PUSH frames (see wire.h) on its port, one thread per
// worker connection. It never exits by itself: Trainyard stops the ps tasks
// when the workers are done.
#pragma once

#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "ps_sgd/model.h"
#include "ps_sgd/task_config.h"
#include "ps_sgd/wire.h"

namespace trainyard::examples {

// The slice of `params` parameters that ps `index` of `num_ps` holds.
Range ParameterShard(int params, int index, int num_ps);

// One shard's values, safe to use from many connection threads.
class ShardStore {
 public:
  ShardStore(uint32_t offset, std::vector<double> values, uint32_t epoch)
      : offset_(offset), values_(std::move(values)), epoch_(epoch) {}
  Slice Pull() const;
  // Adds `deltas` and returns the updated values; an error when the slice
  // does not match this shard.
  absl::StatusOr<Slice> Push(const Slice& deltas);
  // Raises the last finished epoch to at least `epoch`; returns it.
  uint32_t RaiseEpoch(uint32_t epoch);

 private:
  const uint32_t offset_;
  mutable std::mutex mu_;
  std::vector<double> values_;
  uint32_t epoch_;
};

// Restores or zero-initializes the shard, listens and serves forever.
// Returns only on a startup error (bad checkpoint, port busy).
absl::Status RunParameterServer(const TaskConfig& task, int num_params);

}  // namespace trainyard::examples
