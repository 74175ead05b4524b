// Worker training loop of the parameter-server example.
#include "ps_sgd/worker.h"

#include <unistd.h>

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ps_sgd/checkpoint.h"
#include "ps_sgd/ps_server.h"

namespace trainyard::examples {

PsClient::PsClient(std::vector<std::string> addresses, int num_params, absl::Duration connect_timeout)
    : addresses_(std::move(addresses)),
      fds_(addresses_.size(), -1),
      num_params_(num_params),
      connect_timeout_(connect_timeout) {}

PsClient::~PsClient() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

absl::StatusOr<Slice> PsClient::Call(int ps, const std::string& request) {
  // One reconnection per call: a restarted ps comes back on the same port.
  absl::Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fds_[ps] < 0) {
      auto fd = ConnectTcp(addresses_[ps], absl::Now() + connect_timeout_);
      if (!fd.ok()) return absl::UnavailableError(absl::StrCat("ps ", ps, " at ", addresses_[ps], ": ", fd.status().message()));
      fds_[ps] = *fd;
    }
    absl::StatusOr<std::string> reply = SendFrame(fds_[ps], request).ok() ? RecvFrame(fds_[ps])
                                                                        : absl::UnavailableError("send failed");
    if (reply.ok()) {
      auto slice = DecodeSliceReply(*reply);
      if (!slice.ok()) return absl::Status(slice.status().code(), absl::StrCat("ps ", ps, ": ", slice.status().message()));
      Range want = ParameterShard(num_params_, ps, static_cast<int>(addresses_.size()));
      if (static_cast<int>(slice->offset) != want.begin || static_cast<int>(slice->values.size()) != want.size()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ps ", ps, " serves [", slice->offset, ", ", slice->offset + slice->values.size(), "), expected [",
            want.begin, ", ", want.end, "): do all tasks use the same --features and ps list?"));
      }
      return slice;
    }
    last = reply.status();
    close(fds_[ps]);
    fds_[ps] = -1;
  }
  return absl::UnavailableError(absl::StrCat("ps ", ps, " at ", addresses_[ps], ": ", last.message()));
}

absl::StatusOr<std::vector<double>> PsClient::Pull() {
  std::vector<double> params(num_params_);
  for (int ps = 0; ps < static_cast<int>(addresses_.size()); ++ps) {
    auto slice = Call(ps, EncodePull());
    if (!slice.ok()) return slice.status();
    std::copy(slice->values.begin(), slice->values.end(), params.begin() + slice->offset);
  }
  return params;
}

absl::StatusOr<std::vector<double>> PsClient::Push(const std::vector<double>& deltas) {
  std::vector<double> params(num_params_);
  for (int ps = 0; ps < static_cast<int>(addresses_.size()); ++ps) {
    Range r = ParameterShard(num_params_, ps, static_cast<int>(addresses_.size()));
    Slice part{static_cast<uint32_t>(r.begin),
               std::vector<double>(deltas.begin() + r.begin, deltas.begin() + r.end)};
    auto slice = Call(ps, EncodePush(part));
    if (!slice.ok()) return slice.status();
    std::copy(slice->values.begin(), slice->values.end(), params.begin() + slice->offset);
  }
  return params;
}

namespace {

// One pass over the worker's shard in mini-batches.
absl::Status TrainEpoch(const Dataset& data, Range shard, const TrainOptions& o, PsClient* ps) {
  auto params = ps->Pull();
  if (!params.ok()) return params.status();
  std::vector<double> grad;
  for (int begin = shard.begin; begin < shard.end; begin += o.batch) {
    Range batch{begin, std::min(begin + o.batch, shard.end)};
    Gradient(data, *params, batch, &grad);
    for (double& g : grad) g *= -o.learning_rate;
    params = ps->Push(grad);
    if (!params.ok()) return params.status();
  }
  return absl::OkStatus();
}

// The epoch to start at: the one after the job's checkpoint, else 1.
// Without a job master the workers are not lined up, so a worker's first
// start must not pick up the checkpoint the chief just wrote in this run
// (it would skip epochs): it restores only when restarted. With a job
// master no checkpoint of this run exists before every worker started.
absl::StatusOr<int> StartEpoch(const TaskConfig& task) {
  if (task.job_master.empty() && task.restart_count == 0) return 1;
  auto ckpt = ReadCheckpoint(task.checkpoint_dir);
  if (!ckpt.ok()) return ckpt.status();
  if (!ckpt->has_value()) return 1;
  std::printf("resumed from epoch %d\n", (*ckpt)->epoch);
  return (*ckpt)->epoch + 1;
}

}  // namespace

absl::Status RunWorker(const TaskConfig& task, const TrainOptions& options, EpochSync* sync) {
  Dataset data = MakeDataset(options.data);
  Range shard = ShardOf(data.samples, task.rank, task.num_workers);
  Range all{0, data.samples};
  PsClient ps(task.ps, ParameterCount(data.features), options.connect_timeout);
  std::printf("worker %d of %d (%s): samples [%d, %d), %zu ps%s\n", task.rank, task.num_workers,
              task.task_name.c_str(), shard.begin, shard.end, task.ps.size(),
              task.is_chief() ? ", chief" : "");
  if (absl::Status s = sync->Start(); !s.ok()) return s;
  absl::StatusOr<int> start = StartEpoch(task);
  if (!start.ok()) return start.status();
  for (int epoch = *start; epoch <= options.epochs; ++epoch) {
    if (absl::Status s = TrainEpoch(data, shard, options, &ps); !s.ok()) return s;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(options.epoch_sleep));
    if (absl::Status s = sync->Barrier(absl::StrCat("the end of epoch ", epoch)); !s.ok()) return s;
    // Between the two barriers nobody pushes: every worker sees the same
    // parameters, and the chief's checkpoint is exactly epoch `epoch`.
    auto params = ps.Pull();
    if (!params.ok()) return params.status();
    if (task.is_chief()) {
      if (absl::Status s = WriteCheckpoint(task.checkpoint_dir, Checkpoint{epoch, *params}); !s.ok()) return s;
    }
    if (absl::Status s = sync->Barrier(absl::StrCat("the checkpoint of epoch ", epoch)); !s.ok()) return s;
    std::printf("epoch %d loss %.4f\n", epoch, LogLoss(data, *params, all));
  }
  if (absl::Status s = sync->Complete(); !s.ok()) return s;
  std::printf("worker %d done\n", task.rank);
  return absl::OkStatus();
}

}  // namespace trainyard::examples
