// MasterState: "who is rank 0" — worker 0's address for frameworks that need
// only their rendezvous point (MASTER_ADDR / MASTER_PORT). Answered at once
// when worker 0 has joined, else when it joins or at the request's timeout.
// Each answer is one small frame, whatever the job's size.
#include "absl/strings/str_format.h"
#include "jobmaster/master_state.h"

namespace trainyard::jobmaster {

void MasterState::HandleRankZero(ConnId conn, uint64_t request_id,
                                 const pb::RankZeroRequest& request, absl::Time now) {
  if (workers_[0].joined) return ReplyRankZero(conn, request_id);
  absl::Duration wait =
      request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms()) : config_.response_wait;
  rank0_waiters_.push_back(Waiter{conn, request_id, now + wait});
  AddWait(conn);
}

void MasterState::ReplyRankZero(ConnId conn, uint64_t request_id) {
  const Worker& w = workers_[0];
  scratch_.Clear();
  scratch_.set_request_id(request_id);
  pb::RankZeroReply* reply = scratch_.mutable_rank_zero();
  *reply->mutable_info() = w.info;
  reply->mutable_info()->set_ip(w.address);  // its ip, else the address it came from
  reply->set_num_workers(config_.num_workers);
  reply->set_restart_count(w.restart_count);
  outbox_->Send(conn, scratch_);
}

void MasterState::AnswerRankZeroWaiters() {
  for (const Waiter& w : rank0_waiters_) {
    ReplyRankZero(w.conn, w.request_id);
    RemoveWait(w.conn);
  }
  rank0_waiters_.clear();
}

void MasterState::ExpireRankZeroWaiters(absl::Time now) {
  std::erase_if(rank0_waiters_, [&](const Waiter& w) {
    if (w.deadline > now) return false;
    SendError(w.conn, w.request_id, absl::DeadlineExceededError(absl::StrFormat(
        "worker 0 of job %s has not joined in time (%d of %d workers joined)", config_.job_name,
        joined_count_, config_.num_workers)));
    RemoveWait(w.conn);
    return true;
  });
}

}  // namespace trainyard::jobmaster
