// MasterState: the requests that may wait — ListWorkers with
// RESPONSE_AFTER_ALL_JOINED and barriers — and the tick that applies their
// timeouts and the ping deadlines.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/duration_text.h"
#include "common/logging.h"
#include "jobmaster/master_state.h"
#include "jobmaster/worker_table.h"

namespace trainyard::jobmaster {
namespace {

// Missing workers named in an error before it says "and N more".
constexpr int kMaxNamed = 10;

absl::Duration MillisOr(int64_t ms, absl::Duration fallback) {
  return ms > 0 ? absl::Milliseconds(ms) : fallback;
}

}  // namespace

const SharedBody& MasterState::SerializedList() {
  if (list_cache_valid_) return list_cache_;
  pb::ListWorkersReply reply;
  reply.set_num_workers(config_.num_workers);
  reply.set_barrier_generation(barrier_generation_);
  for (int id = 0; id < config_.num_workers; ++id) {
    const Worker& w = workers_[id];
    if (!w.joined) continue;
    pb::WorkerStatus* s = reply.add_workers();
    *s->mutable_info() = w.info;
    s->set_state(w.state);
    s->set_reason(w.reason);
    s->set_restart_count(w.restart_count);
    s->set_connected(w.conn != 0);
    s->set_in_barrier(barrier_[id].conn != 0);
  }
  // A new string: connections may still hold the one before.
  list_cache_ = std::make_shared<const std::string>(reply.SerializeAsString());
  list_cache_valid_ = true;
  ++list_encodings_;
  return list_cache_;
}

const SharedBody& MasterState::SerializedTable() {
  if (table_version_ == membership_version_) return table_cache_;
  WorkerTableEncoder encoder(config_.job_name);
  for (int id = 0; id < config_.num_workers; ++id) {
    const Worker& w = workers_[id];
    if (w.joined) encoder.Add(w.info, w.address, w.restart_count);
  }
  table_cache_ = std::make_shared<const std::string>(
      encoder.Finish(config_.num_workers, membership_version_));
  table_version_ = membership_version_;
  ++table_encodings_;
  return table_cache_;
}

void MasterState::AnswerList(ConnId conn, uint64_t request_id, bool table, int64_t known_version) {
  if (!table) {
    return outbox_->SendShared(conn, request_id, pb::JobMasterResponse::kWorkersFieldNumber,
                               SerializedList());
  }
  if (known_version != 0 && known_version == membership_version_) {
    scratch_.Clear();
    scratch_.set_request_id(request_id);
    pb::WorkerTable* t = scratch_.mutable_table();
    t->set_num_workers(config_.num_workers);
    t->set_version(membership_version_);
    t->set_unchanged(true);
    return outbox_->Send(conn, scratch_);
  }
  outbox_->SendShared(conn, request_id, pb::JobMasterResponse::kTableFieldNumber,
                      SerializedTable());
}

void MasterState::HandleList(ConnId conn, uint64_t request_id,
                             const pb::ListWorkersRequest& request, absl::Time now) {
  if (request.mode() == pb::IMMEDIATE || joined_count_ == config_.num_workers) {
    return AnswerList(conn, request_id, request.table(), request.known_version());
  }
  if (request.mode() != pb::RESPONSE_AFTER_ALL_JOINED) {
    return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
        "list_workers mode %d is unknown: use IMMEDIATE or RESPONSE_AFTER_ALL_JOINED",
        static_cast<int>(request.mode()))));
  }
  list_waiters_.push_back(Waiter{conn, request_id,
                                 now + MillisOr(request.timeout_ms(), config_.response_wait),
                                 request.table(), request.known_version()});
  AddWait(conn);
}

void MasterState::AnswerListWaiters() {
  // Each kind is encoded once (SerializedList / SerializedTable cache it)
  // and the same bytes go to every waiter.
  for (const Waiter& w : list_waiters_) {
    AnswerList(w.conn, w.request_id, w.table, w.known_version);
    RemoveWait(w.conn);
  }
  list_waiters_.clear();
}

void MasterState::HandleBarrier(int id, ConnId conn, uint64_t request_id,
                                const pb::BarrierRequest& request, absl::Time now) {
  if (job_end_) {
    return SendError(conn, request_id, absl::FailedPreconditionError(absl::StrFormat(
        "job %s already ended %s", config_.job_name, JobOutcomeName(job_end_->outcome))));
  }
  pb::WorkerState own = workers_[id].state;
  if (own != pb::STARTING && own != pb::RUNNING) {
    return SendError(conn, request_id, absl::FailedPreconditionError(absl::StrFormat(
        "worker %d is %s and cannot enter a barrier", id, WorkerStateName(own))));
  }
  if (request.has_generation()) {
    int64_t g = request.generation();
    if (g < 0) {
      return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
          "barrier generation %d is negative: it counts the job's barriers from 0", g)));
    }
    if (g < barrier_generation_) return AnswerPassedBarrier(conn, request_id, g);
    if (g > barrier_generation_ && !learning_barriers_) {
      // Only a master that lost the count can be behind a worker; believing
      // anyone else would let one request (generation 2^62) skip the job's
      // later barriers for every worker.
      return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
          "barrier generation %d is ahead of job %s: it has passed %d barrier(s), so the open "
          "barrier is generation %d", g, config_.job_name, barrier_generation_,
          barrier_generation_)));
    }
    if (g > barrier_generation_) AdvanceBarrierTo(g);
  }
  if (state_counts_[pb::COMPLETED] + state_counts_[pb::ERROR] > 0) {
    return SendError(conn, request_id, absl::AbortedError(absl::StrFormat(
        "barrier cannot complete: %s", BlockingWorker())));
  }
  Waiter& slot = barrier_[id];
  if (barrier_count_ == 0) barrier_opened_ = now;
  if (slot.conn == 0) ++barrier_count_;  // else: a retry replaces the earlier request
  list_cache_valid_ = false;
  slot = Waiter{conn, request_id, now + MillisOr(request.timeout_ms(), config_.barrier_timeout)};
  barrier_next_deadline_ = std::min(barrier_next_deadline_, slot.deadline);
  if (barrier_count_ == config_.num_workers) {
    barrier_seconds_.Observe(absl::ToDoubleSeconds(now - barrier_opened_));
    CompleteBarrier();
  }
}

void MasterState::CompleteBarrier() {
  // Recorded first: a master that dies after answering must not come back
  // believing fewer barriers passed than the workers were told.
  outbox_->BarriersPassed(barrier_generation_ + 1);
  scratch_.Clear();
  scratch_.mutable_barrier()->set_generation(barrier_generation_);
  for (Waiter& w : barrier_) {
    scratch_.set_request_id(w.request_id);
    outbox_->Send(w.conn, scratch_);
    w = Waiter{};
  }
  barrier_count_ = 0;
  ++barrier_generation_;
  // Every worker reached this barrier here, so the count is this master's
  // own from now on.
  learning_barriers_ = false;
  barrier_next_deadline_ = absl::InfiniteFuture();
  list_cache_valid_ = false;
}

void MasterState::AnswerPassedBarrier(ConnId conn, uint64_t request_id, int64_t generation) {
  // Barrier `generation` completed: every worker reached it. This request is
  // a retry whose answer was lost with the connection.
  scratch_.Clear();
  scratch_.set_request_id(request_id);
  scratch_.mutable_barrier()->set_generation(generation);
  outbox_->Send(conn, scratch_);
}

void MasterState::AdvanceBarrierTo(int64_t generation) {
  // A worker that waits on barrier `generation` passed every barrier before
  // it, so they all completed (before this master started): the workers
  // waiting here now wait on one of those and are let through.
  Log(LogLevel::kInfo, "jobmaster",
      "barrier generation goes from %d to %d: a worker reports passing barrier %d (the master "
      "restarted)", barrier_generation_, generation, generation - 1);
  if (barrier_count_ > 0) CompleteBarrier();
  barrier_generation_ = generation;
  outbox_->BarriersPassed(generation);
  list_cache_valid_ = false;
}

void MasterState::FailBarrier(const absl::Status& status) {
  for (Waiter& w : barrier_) {
    if (w.conn == 0) continue;
    SendError(w.conn, w.request_id, status);
    w = Waiter{};
  }
  barrier_count_ = 0;
  barrier_next_deadline_ = absl::InfiniteFuture();
  list_cache_valid_ = false;
}

void MasterState::DropWaits(ConnId conn, int id) {
  // A connection waits in the barrier only in its worker's slot, and on
  // lists only where waits_by_conn_ says so: no scan of every worker.
  if (barrier_[id].conn == conn) {
    barrier_[id] = Waiter{};
    --barrier_count_;
    list_cache_valid_ = false;
  }
  if (waits_by_conn_.erase(conn) == 0) return;
  auto mine = [conn](const Waiter& w) { return w.conn == conn; };
  std::erase_if(list_waiters_, mine);
  std::erase_if(rank0_waiters_, mine);
}

void MasterState::AddWait(ConnId conn) { ++waits_by_conn_[conn]; }

void MasterState::RemoveWait(ConnId conn) {
  auto it = waits_by_conn_.find(conn);
  if (it != waits_by_conn_.end() && --it->second == 0) waits_by_conn_.erase(it);
}

bool MasterState::Waits(ConnId conn) const {
  auto it = bindings_.find(conn);
  if (it != bindings_.end() && barrier_[it->second].conn == conn) return true;
  return waits_by_conn_.contains(conn);
}

void MasterState::OnConnectionClosed(ConnId conn) {
  auto it = bindings_.find(conn);
  if (it == bindings_.end()) return;
  int id = it->second;
  bindings_.erase(it);
  DropWaits(conn, id);
  if (workers_[id].conn == conn) {
    workers_[id].conn = 0;
    list_cache_valid_ = false;
  }
}

void MasterState::OnTick(absl::Time now) {
  now_ = now;
  // An order none of whose workers said it checkpoints is answered once
  // the window to say so has passed.
  if (order_.id() != 0 && !order_answered_ && now >= order_taken_ + config_.checkpoint_declare_window) {
    MaybeCheckpointed();
  }
  CheckPings(now);
  ExpireBarrierWaiters(now);
  ExpireListWaiters(now);
  ExpireRankZeroWaiters(now);
}

void MasterState::CheckPings(absl::Time now) {
  if (now < next_ping_check_) return;
  next_ping_check_ = now + config_.ping_interval / 2;
  absl::Duration limit = config_.ping_interval * config_.ping_misses;
  for (int id = 0; id < config_.num_workers; ++id) {
    Worker& w = workers_[id];
    if (!w.pings || (w.state != pb::STARTING && w.state != pb::RUNNING)) continue;
    absl::Duration silent = now - w.last_seen;
    if (silent <= limit) continue;
    SetState(id, pb::ERROR,
             absl::StrFormat("no ping for %s (%d missed pings at an interval of %s)", DurationText(silent),
                             config_.ping_misses, DurationText(config_.ping_interval)));
    AfterTerminalState(id);
  }
}

void MasterState::ExpireBarrierWaiters(absl::Time now) {
  if (now < barrier_next_deadline_) return;
  barrier_next_deadline_ = absl::InfiniteFuture();
  std::string missing = MissingWorkers(true);
  int arrived = barrier_count_;
  for (Waiter& w : barrier_) {
    if (w.conn == 0) continue;
    if (w.deadline > now) {
      barrier_next_deadline_ = std::min(barrier_next_deadline_, w.deadline);
      continue;
    }
    SendError(w.conn, w.request_id, absl::DeadlineExceededError(absl::StrFormat(
        "barrier timed out with %d of %d workers arrived; missing: %s", arrived,
        config_.num_workers, missing)));
    w = Waiter{};
    --barrier_count_;
    list_cache_valid_ = false;
  }
}

void MasterState::ExpireListWaiters(absl::Time now) {
  if (list_waiters_.empty()) return;
  std::string missing;
  std::erase_if(list_waiters_, [&](const Waiter& w) {
    if (w.deadline > now) return false;
    if (missing.empty()) missing = MissingWorkers(false);
    SendError(w.conn, w.request_id, absl::DeadlineExceededError(absl::StrFormat(
        "not all workers joined in time: %d of %d joined; missing: %s", joined_count_,
        config_.num_workers, missing)));
    RemoveWait(w.conn);
    return true;
  });
}

std::string MasterState::MissingWorkers(bool barrier) const {
  std::string out;
  int named = 0, more = 0;
  for (int id = 0; id < config_.num_workers; ++id) {
    bool missing = barrier ? barrier_[id].conn == 0 : !workers_[id].joined;
    if (!missing) continue;
    if (named == kMaxNamed) {
      ++more;
      continue;
    }
    absl::StrAppendFormat(&out, "%s%d", named == 0 ? "" : ", ", id);
    ++named;
  }
  if (more > 0) absl::StrAppendFormat(&out, " and %d more", more);
  return out;
}

std::string MasterState::BlockingWorker() const {
  for (int id = 0; id < config_.num_workers; ++id) {
    const Worker& w = workers_[id];
    if (w.state != pb::COMPLETED && w.state != pb::ERROR) continue;
    return absl::StrFormat("worker %d is %s%s", id, WorkerStateName(w.state),
                           w.reason.empty() ? "" : " (" + w.reason + ")");
  }
  return "no worker blocks it";
}

}  // namespace trainyard::jobmaster
