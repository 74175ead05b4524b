// The worker of the parameter-server example: pulls parameters from the ps
// tasks, computes gradients on its shard of the data set, pushes updates,
// and once per epoch lines up with the other workers, prints the loss and
// (the chief) checkpoints. On start it resumes after the job's checkpoint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps_sgd/epoch_sync.h"
#include "ps_sgd/model.h"
#include "ps_sgd/task_config.h"
#include "ps_sgd/wire.h"

namespace trainyard::examples {

struct TrainOptions {
  DatasetOptions data;
  int epochs = 12;
  int batch = 500;
  double learning_rate = 0.05;
  // Extra time each epoch takes (so a test can kill a worker mid-training).
  absl::Duration epoch_sleep = absl::ZeroDuration();
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration barrier_timeout = absl::Seconds(600);
};

// Connections to every ps; the full parameter vector is their slices in
// index order.
class PsClient {
 public:
  PsClient(std::vector<std::string> addresses, int num_params, absl::Duration connect_timeout);
  ~PsClient();
  absl::StatusOr<std::vector<double>> Pull();
  // Adds `deltas` (a full-length vector) on the servers; returns the values
  // after the update.
  absl::StatusOr<std::vector<double>> Push(const std::vector<double>& deltas);
  // Raises the job's last finished epoch, kept by ps 0, to at least `epoch`
  // (0 reads it); returns it.
  absl::StatusOr<int> RaiseEpoch(int epoch);

 private:
  // Sends `request` to ps `ps` and returns the answer, reconnecting once.
  absl::StatusOr<std::string> RoundTrip(int ps, const std::string& request);
  absl::StatusOr<Slice> Call(int ps, const std::string& request);
  std::vector<std::string> addresses_;
  std::vector<int> fds_;
  int num_params_;
  absl::Duration connect_timeout_;
};

// Runs the worker to the last epoch. `sync` is the barrier to use.
absl::Status RunWorker(const TaskConfig& task, const TrainOptions& options, EpochSync* sync);

}  // namespace trainyard::examples
