// MasterState: coordinated checkpoints (docs/jobmaster.md, "Checkpoints").
// The server orders a job to checkpoint when it is preempted or past its time
// limit; the order reaches the master pushed to its port (ServerOrder, its
// MAC keyed by the master's job token) and in the answer to its figures. The
// master pushes it to every connected worker that checkpoints (registered
// with Starting.checkpoints), answers polls from the others (shell tasks
// poll with `trainyard worker checkpoint-requested`, which marks them as
// checkpointing), collects each worker's CheckpointDone and, once every
// checkpointing worker that has not ended saved, tells the terminator the
// lowest step they saved: the server then stops the tasks without waiting
// for the rest of the grace.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/order_mac.h"
#include "jobmaster/master_state.h"

namespace trainyard::jobmaster {

namespace {
bool Ended(pb::WorkerState s) { return s == pb::COMPLETED || s == pb::ERROR; }

// Lower-case hex HMAC-SHA256 of `data` under `key`.
std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), md, &len);
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kDigits[md[i] >> 4];
    out[2 * i + 1] = kDigits[md[i] & 0xf];
  }
  return out;
}
}  // namespace

bool SameBytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string ServerOrderMac(std::string_view key, std::string_view job, const pb::CheckpointOrder& order) {
  return HmacSha256Hex(
      key, OrderMacText(absl::string_view(job.data(), job.size()), order.id(), order.deadline_unix_ms(), order.reason()));
}

void MasterState::HandleServerOrder(ConnId conn, uint64_t request_id, const pb::ServerOrder& o, absl::Time now) {
  if (config_.order_key.empty()) {
    return SendError(conn, request_id, absl::PermissionDeniedError(
        "server_order: this master was started without TRAINYARD_JOB_TOKEN, so it cannot tell the server's "
        "orders from others: it takes its orders from the answers to its reports"));
  }
  if (o.job() != config_.job_name) {
    return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
        "server_order.job: '%s' is not this master's job %s", o.job().substr(0, 64), config_.job_name)));
  }
  const pb::CheckpointOrder& order = o.order();
  if (!SameBytes(ServerOrderMac(config_.order_key, o.job(), order), o.mac())) {
    return SendError(conn, request_id, absl::PermissionDeniedError(
        "server_order.mac: does not match: only the server, which holds this master's job token, sends orders"));
  }
  if (order.id() <= 0) {
    return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
        "server_order.order.id: %d is not an order (ids are positive)", order.id())));
  }
  // An order past its deadline is over (the job was stopped): a copy of it
  // sent again, to this job's master after a restart, is not an order.
  if (absl::FromUnixMillis(order.deadline_unix_ms()) < now) {
    return SendError(conn, request_id, absl::FailedPreconditionError(absl::StrFormat(
        "server_order.order.deadline_unix_ms: %d has passed", order.deadline_unix_ms())));
  }
  Log(LogLevel::kInfo, "jobmaster", "the server pushed order %d to the master's port%s", order.id(),
      order.id() > order_.id() ? "" : " (taken already)");
  OnCheckpointOrder(order, now);
  ReplyOrder(conn, request_id);
}

void MasterState::OnCheckpointOrder(const pb::CheckpointOrder& order, absl::Time now) {
  if (order.id() <= order_.id()) return;  // taken already (the server repeats it until the job stops)
  now_ = now;
  order_ = order;
  order_answered_ = false;
  order_taken_ = now;
  Log(LogLevel::kInfo, "jobmaster", "job %s is ordered to checkpoint (order %d): %s", config_.job_name,
      order.id(), order.reason());
  for (const Worker& w : workers_) {
    if (w.checkpoints && w.pings && w.conn != 0 && !Ended(w.state)) ReplyOrder(w.conn, 0);
  }
  MaybeCheckpointed();
}

void MasterState::ReplyOrder(ConnId conn, uint64_t request_id, bool open) {
  scratch_.Clear();
  scratch_.set_request_id(request_id);
  pb::CheckpointOrder* o = scratch_.mutable_checkpoint();
  if (open && order_.id() > 0) *o = order_;
  outbox_->Send(conn, scratch_);
}

void MasterState::HandleCheckpointPoll(int id, ConnId conn, uint64_t request_id) {
  Worker& w = workers_[id];
  w.checkpoints = true;
  // A worker that saved for the open order is not asked again (a script
  // polls every step until its task is stopped).
  ReplyOrder(conn, request_id, w.saved_order != order_.id());
}

void MasterState::HandleCheckpointDone(int id, ConnId conn, uint64_t request_id, const pb::CheckpointDone& done) {
  Worker& w = workers_[id];
  int64_t order = done.id() == 0 ? order_.id() : done.id();
  if (order_.id() == 0 || order != order_.id()) {
    return SendError(conn, request_id, absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint_done.id: worker %d reported a checkpoint for order %s, but %s", id,
        done.id() == 0 ? "0 (the open one)" : absl::StrCat(done.id()),
        order_.id() == 0 ? "the job was never ordered to checkpoint"
                         : absl::StrFormat("the job's open order is %d", order_.id()))));
  }
  if (done.step() < 0) {
    return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint_done.step: %d is negative; give the training step the checkpoint holds", done.step())));
  }
  w.checkpoints = true;
  w.saved_order = order;
  w.saved_step = done.step();
  Log(LogLevel::kInfo, "jobmaster", "worker %d saved its checkpoint at step %d (order %d)", id, done.step(), order);
  ReplyOrder(conn, request_id);
  MaybeCheckpointed();
}

void MasterState::MaybeCheckpointed() {
  if (order_.id() == 0 || order_answered_) return;
  CheckpointResult result{.job = config_.job_name, .order_id = order_.id()};
  for (const Worker& w : workers_) {
    if (!w.checkpoints || Ended(w.state)) continue;
    if (w.saved_order != order_.id()) return;  // still saving
    result.step = result.workers == 0 ? w.saved_step : std::min(result.step, w.saved_step);
    ++result.workers;
  }
  result.saved = result.workers > 0;
  // Within the window after the order a worker that joined and has not
  // said it checkpoints may still (a shell worker's first poll): wait.
  const bool in_window = now_ < order_taken_ + config_.checkpoint_declare_window;
  if (in_window && std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) {
        return w.joined && !w.checkpoints && !Ended(w.state);
      })) {
    return;
  }
  // A step is the job's only once every worker is known: one that has not
  // (re)joined yet, after this master restarted, may checkpoint too. The
  // server's deadline covers a worker that never comes.
  if (result.saved && joined_count_ < config_.num_workers) return;
  // That none checkpoints is known only once the window to say so passed
  // (OnTick asks again): the order may have come before a worker's first
  // poll, or before it joined at all.
  if (!result.saved && in_window) return;
  order_answered_ = true;
  if (result.saved) {
    Log(LogLevel::kInfo, "jobmaster", "job %s checkpointed at step %d by %d worker(s)", config_.job_name, result.step,
        result.workers);
  } else {
    Log(LogLevel::kInfo, "jobmaster", "job %s: no worker checkpoints; its tasks are stopped with their grace",
        config_.job_name);
  }
  terminator_->Checkpointed(result);
}

}  // namespace trainyard::jobmaster
