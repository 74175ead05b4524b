// Parameter server: shard restore, accept loop and one handler thread per
// worker connection.
#include "ps_sgd/ps_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ps_sgd/checkpoint.h"

namespace trainyard::examples {
namespace {

// Answers frames on `fd` until the worker hangs up.
void ServeConnection(int fd, ShardStore* store) {
  for (;;) {
    absl::StatusOr<std::string> frame = RecvFrame(fd);
    if (!frame.ok()) break;
    std::string reply;
    if (frame->empty()) {
      reply = EncodeErrorReply("empty request");
    } else if (static_cast<PsOp>((*frame)[0]) == PsOp::kPull) {
      reply = EncodeSliceReply(store->Pull());
    } else if (static_cast<PsOp>((*frame)[0]) == PsOp::kPush) {
      absl::StatusOr<Slice> deltas = DecodePushBody(absl::string_view(*frame).substr(1));
      absl::StatusOr<Slice> updated = deltas.ok() ? store->Push(*deltas) : deltas.status();
      reply = updated.ok() ? EncodeSliceReply(*updated) : EncodeErrorReply(std::string(updated.status().message()));
    } else if (static_cast<PsOp>((*frame)[0]) == PsOp::kEpoch) {
      absl::StatusOr<uint32_t> epoch = DecodeEpochBody(absl::string_view(*frame).substr(1));
      reply = epoch.ok() ? EncodeEpochReply(store->RaiseEpoch(*epoch))
                         : EncodeErrorReply(std::string(epoch.status().message()));
    } else {
      reply = EncodeErrorReply(absl::StrCat("unknown op ", static_cast<int>((*frame)[0])));
    }
    if (!SendFrame(fd, reply).ok()) break;
  }
  close(fd);
}

}  // namespace

Range ParameterShard(int params, int index, int num_ps) { return ShardOf(params, index, num_ps); }

Slice ShardStore::Pull() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Slice{offset_, values_};
}

absl::StatusOr<Slice> ShardStore::Push(const Slice& deltas) {
  std::lock_guard<std::mutex> lock(mu_);
  if (deltas.offset != offset_ || deltas.values.size() != values_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push of [", deltas.offset, ", ", deltas.offset + deltas.values.size(), ") does not match this shard [",
        offset_, ", ", offset_ + values_.size(), "): do the workers and ps use the same --features?"));
  }
  for (size_t i = 0; i < values_.size(); ++i) values_[i] += deltas.values[i];
  return Slice{offset_, values_};
}

uint32_t ShardStore::RaiseEpoch(uint32_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  epoch_ = std::max(epoch_, epoch);
  return epoch_;
}

absl::Status RunParameterServer(const TaskConfig& task, int num_params) {
  Range shard = ParameterShard(num_params, task.index, static_cast<int>(task.ps.size()));
  std::vector<double> values(shard.size(), 0.0);
  uint32_t epoch = 0;
  auto ckpt = ReadCheckpoint(task.checkpoint_dir);
  if (!ckpt.ok()) return ckpt.status();
  if (ckpt->has_value()) {
    const Checkpoint& c = **ckpt;
    if (static_cast<int>(c.params.size()) != num_params) {
      return absl::FailedPreconditionError(absl::StrCat(
          CheckpointPath(task.checkpoint_dir), " holds ", c.params.size(), " parameters, the model has ",
          num_params, ": was it written with other --features?"));
    }
    values.assign(c.params.begin() + shard.begin, c.params.begin() + shard.end);
    epoch = static_cast<uint32_t>(c.epoch);
    std::printf("resumed from epoch %d\n", c.epoch);
  }
  absl::StatusOr<int> listen_fd = ListenTcp(task.listen_port);
  if (!listen_fd.ok()) return listen_fd.status();
  std::printf("ps %d serving parameters [%d, %d) on port %d\n", task.index, shard.begin, shard.end,
              LocalPort(*listen_fd));
  std::fflush(stdout);
  ShardStore store(static_cast<uint32_t>(shard.begin), std::move(values), epoch);
  for (;;) {
    int fd = accept4(*listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return absl::InternalError(absl::StrCat("accept failed: ", std::strerror(errno)));
    }
    std::thread(ServeConnection, fd, &store).detach();
  }
}

}  // namespace trainyard::examples
