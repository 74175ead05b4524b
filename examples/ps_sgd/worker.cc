// Worker training loop of the parameter-server example.
#include "ps_sgd/worker.h"

#include <unistd.h>

#include <algorithm>
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

absl::StatusOr<std::string> PsClient::RoundTrip(int ps, const std::string& request) {
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
    if (reply.ok()) return reply;
    last = reply.status();
    close(fds_[ps]);
    fds_[ps] = -1;
  }
  return absl::UnavailableError(absl::StrCat("ps ", ps, " at ", addresses_[ps], ": ", last.message()));
}

absl::StatusOr<Slice> PsClient::Call(int ps, const std::string& request) {
  absl::StatusOr<std::string> reply = RoundTrip(ps, request);
  if (!reply.ok()) return reply.status();
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

absl::StatusOr<int> PsClient::RaiseEpoch(int epoch) {
  absl::StatusOr<std::string> reply = RoundTrip(0, EncodeEpoch(static_cast<uint32_t>(epoch)));
  if (!reply.ok()) return reply.status();
  absl::StatusOr<uint32_t> now = DecodeEpochReply(*reply);
  if (!now.ok()) return absl::Status(now.status().code(), absl::StrCat("ps 0: ", now.status().message()));
  return static_cast<int>(*now);
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

// The epoch to start at: the one after the last finished epoch, else 1.
// With a job master that is the later of the checkpoint's epoch and the
// epoch ps 0 holds (raised by every worker as it leaves an epoch's barrier):
// a worker killed just after a barrier, before the chief wrote the
// checkpoint, must not train that epoch again while the others wait at the
// next barrier. Without a job master the workers are not lined up, so a
// worker's first start must not pick up the checkpoint the chief just wrote
// in this run (it would skip epochs): it restores only when restarted.
absl::StatusOr<int> StartEpoch(const TaskConfig& task, PsClient* ps) {
  bool barriers = !task.job_master.empty();
  if (!barriers && task.restart_count == 0) return 1;
  auto ckpt = ReadCheckpoint(task.checkpoint_dir);
  if (!ckpt.ok()) return ckpt.status();
  int done = ckpt->has_value() ? (*ckpt)->epoch : 0;
  if (barriers) {
    absl::StatusOr<int> live = ps->RaiseEpoch(0);
    if (!live.ok()) return live.status();
    done = std::max(done, *live);
  }
  if (done == 0) return 1;
  std::printf("resumed from epoch %d\n", done);
  return done + 1;
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
  absl::StatusOr<int> start = StartEpoch(task, &ps);
  if (!start.ok()) return start.status();
  for (int epoch = *start; epoch <= options.epochs; ++epoch) {
    if (absl::Status s = TrainEpoch(data, shard, options, &ps); !s.ok()) return s;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(options.epoch_sleep));
    if (absl::Status s = sync->Barrier(absl::StrCat("the end of epoch ", epoch)); !s.ok()) return s;
    // One barrier per epoch, so a restarted worker can tell where the others
    // are: the checkpoint, or ps 0's epoch raised right here.
    if (absl::StatusOr<int> e = ps.RaiseEpoch(epoch); !e.ok()) return e.status();
    auto params = ps.Pull();
    if (!params.ok()) return params.status();
    if (task.is_chief()) {
      if (absl::Status s = WriteCheckpoint(task.checkpoint_dir, Checkpoint{epoch, *params}); !s.ok()) return s;
    }
    std::printf("epoch %d loss %.4f\n", epoch, LogLoss(data, *params, all));
  }
  if (absl::Status s = sync->Complete(); !s.ok()) return s;
  std::printf("worker %d done\n", task.rank);
  return absl::OkStatus();
}

}  // namespace trainyard::examples
