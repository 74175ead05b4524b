// MasterState: dispatch of requests, registration (STARTING / ATTACH), worker
// state changes and the job's end. Waits (lists, barriers) and timeouts live
// in master_waits.cc.
#include "jobmaster/master_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace trainyard::jobmaster {

const char* WorkerStateName(pb::WorkerState state) {
  switch (state) {
    case pb::UNASSIGNED: return "UNASSIGNED";
    case pb::STARTING: return "STARTING";
    case pb::RUNNING: return "RUNNING";
    case pb::COMPLETED: return "COMPLETED";
    case pb::ERROR: return "ERROR";
    default: return "UNKNOWN";
  }
}

namespace {

const char* BodyName(const pb::JobMasterRequest& request) {
  switch (request.body_case()) {
    case pb::JobMasterRequest::kStarting: return "STARTING";
    case pb::JobMasterRequest::kAttach: return "ATTACH";
    case pb::JobMasterRequest::kStateChange:
      return WorkerStateName(request.state_change().state());
    case pb::JobMasterRequest::kPing: return "PING";
    case pb::JobMasterRequest::kListWorkers: return "LIST_WORKERS";
    case pb::JobMasterRequest::kBarrier: return "BARRIER";
    case pb::JobMasterRequest::kRankZero: return "RANK_ZERO";
    case pb::JobMasterRequest::kCheckpointPoll: return "CHECKPOINT_POLL";
    case pb::JobMasterRequest::kCheckpointDone: return "CHECKPOINT_DONE";
    case pb::JobMasterRequest::kServerOrder: return "SERVER_ORDER";
    default: return "an empty request";
  }
}

bool IsTerminal(pb::WorkerState state) { return state == pb::COMPLETED || state == pb::ERROR; }

}  // namespace

MasterState::MasterState(const JobMasterConfig& config, JobTerminator* terminator,
                         Outbox* outbox)
    : config_(config),
      terminator_(terminator),
      outbox_(outbox),
      workers_(config.num_workers),
      barrier_(config.num_workers),
      barrier_generation_(config.passed_barriers),
      learning_barriers_(config.learn_barriers),
      membership_version_(config.first_membership_version) {
  state_counts_[pb::UNASSIGNED] = config.num_workers;
}

void MasterState::OnRequest(ConnId conn, std::string_view peer_ip,
                            const pb::JobMasterRequest& request, absl::Time now) {
  now_ = now;
  uint64_t rid = request.request_id();
  switch (request.body_case()) {
    case pb::JobMasterRequest::kStarting:
      return HandleStarting(conn, peer_ip, rid, request.starting(), now);
    case pb::JobMasterRequest::kAttach: return HandleAttach(conn, rid, request.attach(), now);
    case pb::JobMasterRequest::kServerOrder: return HandleServerOrder(conn, rid, request.server_order(), now);
    case pb::JobMasterRequest::BODY_NOT_SET:
      return SendError(conn, rid, absl::InvalidArgumentError(
                                      "request has no body: set one of starting, attach, "
                                      "state_change, ping, list_workers, barrier, rank_zero, "
                                      "checkpoint_poll, checkpoint_done, server_order"));
    default: break;
  }
  auto it = bindings_.find(conn);
  if (it == bindings_.end()) {
    return SendError(conn, rid, absl::FailedPreconditionError(absl::StrFormat(
                                    "got %s before STARTING: the first message on a connection "
                                    "must be STARTING with the worker's WorkerInfo (or ATTACH "
                                    "for a worker that already registered)",
                                    BodyName(request))));
  }
  int id = it->second;
  workers_[id].last_seen = now;
  switch (request.body_case()) {
    case pb::JobMasterRequest::kStateChange:
      return HandleStateChange(id, conn, rid, request.state_change());
    case pb::JobMasterRequest::kPing: return;
    case pb::JobMasterRequest::kListWorkers:
      return HandleList(conn, rid, request.list_workers(), now);
    case pb::JobMasterRequest::kBarrier:
      return HandleBarrier(id, conn, rid, request.barrier(), now);
    case pb::JobMasterRequest::kRankZero:
      return HandleRankZero(conn, rid, request.rank_zero(), now);
    case pb::JobMasterRequest::kCheckpointPoll: return HandleCheckpointPoll(id, conn, rid);
    case pb::JobMasterRequest::kCheckpointDone:
      return HandleCheckpointDone(id, conn, rid, request.checkpoint_done());
    default: return;
  }
}

void MasterState::SendError(ConnId conn, uint64_t request_id, const absl::Status& status) {
  scratch_.Clear();
  scratch_.set_request_id(request_id);
  scratch_.mutable_error()->set_code(static_cast<int>(status.code()));
  scratch_.mutable_error()->set_message(std::string(status.message()));
  outbox_->Send(conn, scratch_);
}

void MasterState::ReplyRegistered(ConnId conn, uint64_t request_id, int id) {
  scratch_.Clear();
  scratch_.set_request_id(request_id);
  auto* reply = scratch_.mutable_registered();
  reply->set_worker_id(id);
  reply->set_num_workers(config_.num_workers);
  reply->set_state(workers_[id].state);
  reply->set_barrier_generation(barrier_generation_);
  outbox_->Send(conn, scratch_);
}

absl::StatusOr<int> MasterState::ChooseWorkerId(ConnId conn, const pb::Starting& starting,
                                                std::string_view peer_ip) const {
  int n = config_.num_workers;
  int id = starting.info().worker_id();
  auto bound = bindings_.find(conn);
  if (bound != bindings_.end() && id != bound->second && id != -1) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "this connection already speaks for worker %d; STARTING for worker %d must use its "
        "own connection", bound->second, id));
  }
  if (id == -1 && bound != bindings_.end()) return bound->second;
  if (id == -1) {
    // lowest_unjoined_ only grows: the search resumes there, so a job whose
    // workers all ask for an id costs O(N) in all, not O(N) each.
    for (int i = lowest_unjoined_; i < n; ++i) {
      if (!workers_[i].joined) return i;
    }
    return absl::ResourceExhaustedError(absl::StrFormat(
        "all %d worker ids of job %s are taken; a restarted worker must present its own id "
        "(TRAINYARD_WORKER_ID)", n, config_.job_name));
  }
  if (id < -1 || id >= n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker_id %d is outside 0..%d (job %s has %d workers; -1 asks for the next free id)",
        id, n - 1, config_.job_name, n));
  }
  const Worker& w = workers_[id];
  // The same worker again from the same address is its restart; the address
  // is the connection's, not one the request names.
  if (w.conn != 0 && w.conn != conn && w.peer != peer_ip) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "worker %d is already registered from %s and its connection is alive; refusing "
        "STARTING from %s", id, w.peer, peer_ip));
  }
  return id;
}

absl::Status MasterState::CheckJobSecret(std::string_view presented, std::string_view verb) const {
  if (config_.job_secret.empty()) return absl::OkStatus();
  if (SameBytes(presented, config_.job_secret)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrFormat(
      "%s without job %s's secret: a worker shows the TRAINYARD_JOB_SECRET its task was given", verb,
      config_.job_name));
}

void MasterState::HandleStarting(ConnId conn, std::string_view peer_ip, uint64_t request_id,
                                 const pb::Starting& starting, absl::Time now) {
  if (job_end_) {
    return SendError(conn, request_id, absl::FailedPreconditionError(absl::StrFormat(
        "job %s already ended %s (%s)", config_.job_name, JobOutcomeName(job_end_->outcome),
        job_end_->reason)));
  }
  if (absl::Status s = CheckJobSecret(starting.job_secret(), "STARTING"); !s.ok()) {
    return SendError(conn, request_id, s);
  }
  pb::WorkerState resume = starting.resume_state();
  if (resume == pb::STARTING) resume = pb::UNASSIGNED;
  if (resume != pb::UNASSIGNED && resume != pb::RUNNING && resume != pb::COMPLETED) {
    return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
        "resume_state %s is not allowed: a re-registering worker resumes RUNNING or COMPLETED",
        WorkerStateName(resume))));
  }
  std::string address = starting.info().ip().empty() ? std::string(peer_ip) : starting.info().ip();
  absl::StatusOr<int> chosen = ChooseWorkerId(conn, starting, peer_ip);
  if (!chosen.ok()) return SendError(conn, request_id, chosen.status());
  int id = *chosen;
  Worker& w = workers_[id];
  if (w.conn != 0 && w.conn != conn) {
    bindings_.erase(w.conn);  // the same worker from the same address: a restart
    DropWaits(w.conn, id);
  }
  if (barrier_[id].conn != 0) {  // a restarted worker is no longer in the barrier
    barrier_[id] = Waiter{};
    --barrier_count_;
    list_cache_valid_ = false;
  }
  bool restart = w.joined && resume == pb::UNASSIGNED && w.conn != conn;
  w.restart_count = restart ? std::max(starting.restart_count(), w.restart_count + 1)
                            : std::max(starting.restart_count(), w.restart_count);
  w.attempt = starting.restart_count();
  w.info = starting.info();
  w.info.set_worker_id(id);
  w.address = std::move(address);
  w.peer = std::string(peer_ip);
  w.pings = starting.pings();
  w.checkpoints = w.checkpoints || starting.checkpoints();
  w.conn = conn;
  w.last_seen = now;
  bindings_[conn] = id;
  if (!w.joined) {
    w.joined = true;
    ++joined_count_;
    while (lowest_unjoined_ < config_.num_workers && workers_[lowest_unjoined_].joined) {
      ++lowest_unjoined_;
    }
  }
  ++membership_version_;
  SetState(id, resume == pb::UNASSIGNED ? pb::STARTING : resume, starting.resume_reason());
  Log(LogLevel::kDebug, "jobmaster", "worker %d %s from %s", id,
      restart ? "restarted" : "registered", w.address);
  ReplyRegistered(conn, request_id, id);
  // A worker that (re)joins while an order is open hears of it at once.
  if (order_.id() > 0 && !order_answered_ && w.checkpoints && w.pings) ReplyOrder(conn, 0);
  if (joined_count_ == config_.num_workers) AnswerListWaiters();
  if (id == 0) AnswerRankZeroWaiters();
  if (IsTerminal(w.state)) AfterTerminalState(id);
}

void MasterState::HandleAttach(ConnId conn, uint64_t request_id, const pb::Attach& attach,
                               absl::Time now) {
  if (absl::Status s = CheckJobSecret(attach.job_secret(), "ATTACH"); !s.ok()) {
    return SendError(conn, request_id, s);
  }
  int id = attach.worker_id();
  int n = config_.num_workers;
  if (id < 0 || id >= n) {
    return SendError(conn, request_id, absl::InvalidArgumentError(absl::StrFormat(
        "ATTACH worker_id %d is outside 0..%d (job %s has %d workers)", id, n - 1,
        config_.job_name, n)));
  }
  auto bound = bindings_.find(conn);
  if (bound != bindings_.end() && bound->second != id) {
    return SendError(conn, request_id, absl::FailedPreconditionError(absl::StrFormat(
        "this connection already speaks for worker %d, not %d", bound->second, id)));
  }
  if (!workers_[id].joined) {
    return SendError(conn, request_id, absl::NotFoundError(absl::StrFormat(
        "worker %d has not registered (state UNASSIGNED): it must send STARTING first", id)));
  }
  bindings_[conn] = id;
  workers_[id].last_seen = now;
  ReplyRegistered(conn, request_id, id);
}

absl::Status MasterState::CheckTransition(int id, pb::WorkerState target) const {
  pb::WorkerState current = workers_[id].state;
  if (target == pb::STARTING) {
    return absl::InvalidArgumentError(
        "STARTING is announced with a Starting message carrying WorkerInfo, not a state change");
  }
  if (target != pb::RUNNING && target != pb::COMPLETED && target != pb::ERROR) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state %s cannot be reported: send RUNNING, COMPLETED or ERROR", WorkerStateName(target)));
  }
  if (IsTerminal(current) && current != target) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker %d is %s%s; it can only re-register with STARTING", id, WorkerStateName(current),
        workers_[id].reason.empty() ? "" : " (" + workers_[id].reason + ")"));
  }
  return absl::OkStatus();
}

void MasterState::HandleStateChange(int id, ConnId conn, uint64_t request_id,
                                    const pb::StateChange& change) {
  pb::WorkerState target = change.state();
  absl::Status ok = CheckTransition(id, target);
  if (!ok.ok()) return SendError(conn, request_id, ok);
  bool changed = workers_[id].state != target;
  std::string reason = change.reason();
  if (target == pb::ERROR && reason.empty()) reason = "reported by the worker without a reason";
  SetState(id, target, target == pb::ERROR ? reason : "");
  scratch_.Clear();
  scratch_.set_request_id(request_id);
  scratch_.mutable_state()->set_worker_id(id);
  scratch_.mutable_state()->set_state(target);
  outbox_->Send(conn, scratch_);
  if (changed && IsTerminal(target)) AfterTerminalState(id);
}

void MasterState::SetState(int id, pb::WorkerState state, std::string reason) {
  Worker& w = workers_[id];
  --state_counts_[w.state];
  ++state_counts_[state];
  w.state = state;
  w.reason = std::move(reason);
  list_cache_valid_ = false;
}

void MasterState::AfterTerminalState(int id) {
  const Worker& w = workers_[id];
  MaybeCheckpointed();  // it no longer holds up an open order
  if (barrier_count_ > 0) {
    FailBarrier(absl::AbortedError(absl::StrFormat(
        "barrier failed: worker %d reached %s%s while %d worker(s) waited", id,
        WorkerStateName(w.state), w.reason.empty() ? "" : " (" + w.reason + ")",
        barrier_count_)));
  }
  if (w.state == pb::ERROR) {
    Log(LogLevel::kWarning, "jobmaster", "worker %d ERROR: %s", id, w.reason);
    if (terminator_->WorkerFailed({config_.job_name, id, w.attempt, w.reason})) return;
    if (w.restart_count >= config_.max_restarts) {
      EndJob(JobOutcome::kFailed,
             absl::StrFormat("worker %d ended in ERROR after %d of %d restarts: %s", id,
                             w.restart_count, config_.max_restarts, w.reason));
    }
  } else if (state_counts_[pb::COMPLETED] == config_.num_workers) {
    EndJob(JobOutcome::kSucceeded,
           absl::StrFormat("all %d workers COMPLETED", config_.num_workers));
  }
}

void MasterState::EndJob(JobOutcome outcome, std::string reason) {
  if (job_end_) return;
  job_end_ = JobEnd{config_.job_name, outcome, std::move(reason)};
  Log(LogLevel::kInfo, "jobmaster", "job %s %s: %s", config_.job_name, JobOutcomeName(outcome),
      job_end_->reason);
  terminator_->Terminate(*job_end_);
}

}  // namespace trainyard::jobmaster
