// Checkpoints of the parameter-server example: one file per job,
// TRAINYARD_CHECKPOINT_DIR/ps_sgd.ckpt, holding the last finished epoch and
// every parameter. The chief replaces it atomically (write a temporary file,
// fsync, rename), so a reader sees the old or the new checkpoint, never half.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::examples {

struct Checkpoint {
  int epoch = 0;
  std::vector<double> params;
};

// The checkpoint file's path in `dir`.
std::string CheckpointPath(const std::string& dir);

// Writes `ckpt` atomically into `dir` (created if missing).
absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& ckpt);

// Reads the checkpoint in `dir`; nullopt when there is none. A file that is
// not a checkpoint is an error naming the path and the problem.
absl::StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& dir);

}  // namespace trainyard::examples
