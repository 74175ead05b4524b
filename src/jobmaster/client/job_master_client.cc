// JobMasterClient: registration, the I/O thread (responses, pings,
// reconnection) and the blocking and non-blocking calls.
#include "jobmaster/client/job_master_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace trainyard::jobmaster {
namespace {

// Extra time a client waits past a timeout it gave the master, so that the
// master's own, more precise error (naming who is missing) arrives first.
constexpr absl::Duration kGrace = absl::Seconds(2);

int64_t TimeoutMillis(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? 0 : absl::ToInt64Milliseconds(timeout);
}

}  // namespace

JobMasterClient::JobMasterClient(JobMasterClientOptions options) : options_(std::move(options)) {}

template <typename Pred>
bool JobMasterClient::WaitUntil(absl::Time deadline, Pred done) {
  while (!done()) {
    // An infinite deadline waits without a timeout.
    if (cv_.WaitWithDeadline(&mu_, deadline)) return done();
  }
  return true;
}

absl::StatusOr<std::unique_ptr<JobMasterClient>> JobMasterClient::Start(
    JobMasterClientOptions options) {
  std::unique_ptr<JobMasterClient> client(new JobMasterClient(std::move(options)));
  absl::Status s = client->Register(absl::Now() + client->options_.connect_timeout);
  if (!s.ok()) return s;
  client->io_thread_ = std::thread([c = client.get()] { c->IoLoop(); });
  return client;
}

JobMasterClient::~JobMasterClient() {
  std::shared_ptr<FrameConnection> conn;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    conn = conn_;
    cv_.SignalAll();
  }
  if (conn) conn->Shutdown();
  if (io_thread_.joinable()) io_thread_.join();
}

pb::WorkerInfo JobMasterClient::info() const {
  pb::WorkerInfo info = options_.info;
  info.set_worker_id(worker_id_);
  return info;
}

absl::Status JobMasterClient::Register(absl::Time deadline) {
  std::string address = CurrentMasterAddress(options_);
  absl::StatusOr<std::unique_ptr<FrameConnection>> connected = FrameConnection::Connect(address, deadline);
  if (!connected.ok()) return connected.status();
  std::shared_ptr<FrameConnection> conn = std::move(*connected);
  pb::JobMasterRequest request;
  pb::WorkerState state;
  {
    absl::MutexLock lock(&mu_);
    request.set_request_id(next_request_id_++);
    state = last_state_;
    pb::Starting* s = request.mutable_starting();
    *s->mutable_info() = options_.info;
    if (worker_id_ >= 0) s->mutable_info()->set_worker_id(worker_id_);
    s->set_restart_count(options_.restart_count);
    s->set_job_secret(options_.job_secret);
    s->set_pings(true);
    s->set_checkpoints(options_.checkpoints);
    if (state == pb::RUNNING || state == pb::COMPLETED) {
      s->set_resume_state(state);
      s->set_resume_reason(last_reason_);
    }
  }
  absl::StatusOr<pb::JobMasterResponse> reply = conn->Call(request, deadline);
  if (!reply.ok()) return reply.status();
  if (!reply->has_registered()) {
    return absl::InternalError("the job master answered STARTING with something else");
  }
  bool first = worker_id_ < 0;
  if (first) {
    worker_id_ = reply->registered().worker_id();
    num_workers_ = reply->registered().num_workers();
  }
  absl::MutexLock lock(&mu_);
  // Only the first master's count is trusted: a restarted master starts from
  // 0 and learns the job's count from the workers' barrier requests.
  if (first) next_barrier_generation_ = reply->registered().barrier_generation();
  conn_ = conn;
  connected_to_ = address;
  if (state == pb::ERROR) {  // an ERROR is re-reported after registering
    pb::JobMasterRequest error;
    error.set_request_id(next_request_id_++);
    error.mutable_state_change()->set_state(pb::ERROR);
    error.mutable_state_change()->set_reason(last_reason_);
    // A failed send means a broken connection: the I/O thread's next read
    // fails, and the next registration reports the ERROR again.
    conn->Send(error).IgnoreError();
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

void JobMasterClient::IoLoop() {
  absl::Duration backoff = absl::Milliseconds(50);
  absl::Time next_ping = absl::Now() + options_.ping_interval;
  while (true) {
    std::shared_ptr<FrameConnection> conn;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      conn = conn_;
    }
    if (!conn) {
      absl::Status s = Register(absl::Now() + options_.max_backoff);
      if (s.ok()) {
        Log(LogLevel::kInfo, "worker", "re-registered with the job master at %s as worker %d",
            CurrentMasterAddress(options_), worker_id_);
        backoff = absl::Milliseconds(50);
        continue;
      }
      absl::MutexLock lock(&mu_);
      WaitUntil(absl::Now() + backoff, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; });
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    absl::StatusOr<pb::JobMasterResponse> response = conn->Receive(next_ping);
    if (response.ok()) {
      Dispatch(*std::move(response));
    } else if (absl::IsDeadlineExceeded(response.status())) {
      next_ping = absl::Now() + options_.ping_interval;
      // The master was started elsewhere (its node lost): leave the old one,
      // which may still run cut off from the server, for the new address.
      // Only a readable, non-empty file that names another address moves it.
      std::string current = ReadMasterAddressFile(options_.master_address_file);
      if (!current.empty() && current != ConnectedTo()) {
        conn->Shutdown();
        ConnectionLost(absl::UnavailableError(absl::StrCat("the job master moved to ", current)));
        continue;
      }
      pb::JobMasterRequest ping;
      ping.mutable_ping();
      if (absl::Status s = conn->Send(ping); !s.ok()) ConnectionLost(s);
    } else {
      ConnectionLost(response.status());
    }
  }
}

std::string JobMasterClient::ConnectedTo() {
  absl::MutexLock lock(&mu_);
  return connected_to_;
}

void JobMasterClient::Dispatch(pb::JobMasterResponse response) {
  absl::MutexLock lock(&mu_);
  if (response.request_id() == 0 && response.has_checkpoint()) {
    if (response.checkpoint().id() > order_.id()) order_ = response.checkpoint();  // pushed by the master
    return;
  }
  auto it = pending_.find(response.request_id());
  if (it == pending_.end()) {
    if (response.has_error()) {
      last_error_ = StatusFromErrorReply(response.error());
      Log(LogLevel::kWarning, "worker", "the job master refused a request: %s",
          response.error().message());
    }
    return;
  }
  Pending* p = it->second;
  pending_.erase(it);
  if (response.has_error()) {
    p->result = StatusFromErrorReply(response.error());
  } else {
    p->result = std::move(response);
  }
  p->done = true;
  cv_.SignalAll();
}

void JobMasterClient::ConnectionLost(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (!stop_) {
    Log(LogLevel::kWarning, "worker", "%s; reconnecting", why.message());
  }
  conn_.reset();
  directory_.reset();  // a restarted master's versions are its own
  for (auto& [id, p] : pending_) {
    p->result = absl::UnavailableError(absl::StrFormat(
        "%s while waiting for %s; the master may have restarted: retry", why.message(), p->what));
    p->done = true;
  }
  pending_.clear();
  cv_.SignalAll();
}

absl::StatusOr<pb::JobMasterResponse> JobMasterClient::Call(pb::JobMasterRequest request,
                                                            absl::Duration timeout,
                                                            std::string_view what) {
  absl::Time deadline = absl::Now() + timeout;
  Pending p;
  p.what = std::string(what);
  uint64_t id;
  std::shared_ptr<FrameConnection> conn;
  {
    absl::MutexLock lock(&mu_);
    if (!WaitUntil(deadline, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return conn_ != nullptr || stop_; }) ||
        stop_) {
      return absl::UnavailableError(absl::StrFormat(
          "not connected to the job master at %s (reconnecting); %s was not sent",
          CurrentMasterAddress(options_), what));
    }
    id = next_request_id_++;
    request.set_request_id(id);
    pending_[id] = &p;
    conn = conn_;
  }
  absl::Status sent = conn->Send(request);
  absl::MutexLock lock(&mu_);
  if (!sent.ok() && !p.done) {
    pending_.erase(id);
    return sent;
  }
  if (!WaitUntil(deadline, [&p] { return p.done; })) {
    pending_.erase(id);
    return absl::DeadlineExceededError(absl::StrFormat(
        "no answer from the job master to %s within %s", what, absl::FormatDuration(timeout)));
  }
  return std::move(p.result);
}

void JobMasterClient::SendState(pb::WorkerState state, std::string reason) {
  pb::JobMasterRequest request;
  std::shared_ptr<FrameConnection> conn;
  {
    absl::MutexLock lock(&mu_);
    last_state_ = state;
    last_reason_ = reason;
    request.set_request_id(next_request_id_++);
    conn = conn_;
  }
  request.mutable_state_change()->set_state(state);
  request.mutable_state_change()->set_reason(std::move(reason));
  if (conn) conn->Send(request).IgnoreError();  // a failed send is resent on re-registration
}

absl::Status JobMasterClient::SetState(pb::WorkerState state, std::string reason,
                                       absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    last_state_ = state;
    last_reason_ = reason;
  }
  pb::JobMasterRequest request;
  request.mutable_state_change()->set_state(state);
  request.mutable_state_change()->set_reason(std::move(reason));
  return Call(std::move(request), timeout, "a state change").status();
}

absl::StatusOr<pb::ListWorkersReply> JobMasterClient::ListWorkers(pb::ListWorkersMode mode,
                                                                  absl::Duration timeout) {
  pb::JobMasterRequest request;
  request.mutable_list_workers()->set_mode(mode);
  request.mutable_list_workers()->set_timeout_ms(TimeoutMillis(timeout));
  absl::StatusOr<pb::JobMasterResponse> r = Call(std::move(request), timeout + kGrace,
                                                 "the list of workers");
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_workers());
}

absl::StatusOr<std::shared_ptr<const WorkerDirectory>> JobMasterClient::Directory(
    pb::ListWorkersMode mode, absl::Duration timeout) {
  std::shared_ptr<const WorkerDirectory> cached;
  {
    absl::MutexLock lock(&mu_);
    cached = directory_;
  }
  pb::JobMasterRequest request;
  pb::ListWorkersRequest* list = request.mutable_list_workers();
  list->set_mode(mode);
  list->set_timeout_ms(TimeoutMillis(timeout));
  list->set_table(true);
  if (cached != nullptr) list->set_known_version(cached->version);
  absl::StatusOr<pb::JobMasterResponse> r =
      Call(std::move(request), timeout + kGrace, "the worker table");
  if (!r.ok()) return r.status();
  if (!r->has_table()) {
    return absl::UnimplementedError("the job master answered without a worker table (an older master)");
  }
  const pb::WorkerTable& table = r->table();
  if (table.unchanged() && cached != nullptr && cached->version == table.version()) return cached;
  auto fresh = std::make_shared<WorkerDirectory>();
  fresh->num_workers = table.num_workers();
  fresh->version = table.version();
  if (absl::Status s = DecodeWorkerTable(table, &fresh->workers); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  directory_ = fresh;
  return std::shared_ptr<const WorkerDirectory>(std::move(fresh));
}

absl::StatusOr<pb::RankZeroReply> JobMasterClient::RankZero(absl::Duration timeout) {
  pb::JobMasterRequest request;
  request.mutable_rank_zero()->set_timeout_ms(TimeoutMillis(timeout));
  absl::StatusOr<pb::JobMasterResponse> r = Call(std::move(request), timeout + kGrace, "rank 0");
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_rank_zero());
}

pb::CheckpointOrder JobMasterClient::PendingCheckpoint() const {
  absl::MutexLock lock(&mu_);
  return order_;
}

absl::StatusOr<pb::CheckpointOrder> JobMasterClient::PollCheckpoint(absl::Duration timeout) {
  pb::JobMasterRequest request;
  request.mutable_checkpoint_poll();
  absl::StatusOr<pb::JobMasterResponse> r = Call(std::move(request), timeout, "a checkpoint poll");
  if (!r.ok()) return r.status();
  absl::MutexLock lock(&mu_);
  if (r->checkpoint().id() > order_.id()) order_ = r->checkpoint();
  return r->checkpoint();
}

absl::Status JobMasterClient::CheckpointDone(int64_t id, int64_t step, absl::Duration timeout) {
  pb::JobMasterRequest request;
  request.mutable_checkpoint_done()->set_id(id);
  request.mutable_checkpoint_done()->set_step(step);
  return Call(std::move(request), timeout, "a checkpoint report").status();
}

absl::Status JobMasterClient::WaitOnBarrier(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  int64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = next_barrier_generation_;
  }
  absl::Duration backoff = absl::Milliseconds(20);
  while (true) {
    absl::Duration left = deadline - absl::Now();
    pb::JobMasterRequest request;
    request.mutable_barrier()->set_timeout_ms(
        std::max<int64_t>(TimeoutMillis(left), left == absl::InfiniteDuration() ? 0 : 1));
    request.mutable_barrier()->set_generation(generation);
    absl::StatusOr<pb::JobMasterResponse> r = Call(std::move(request), left + kGrace, "a barrier");
    if (r.ok()) {
      absl::MutexLock lock(&mu_);
      next_barrier_generation_ = r->barrier().generation() + 1;
      return absl::OkStatus();
    }
    if (!absl::IsUnavailable(r.status())) return r.status();
    // The master went away (it may have restarted): the I/O thread reconnects
    // and re-registers; enter the same barrier again once it has.
    Log(LogLevel::kInfo, "worker", "barrier %d: %s; entering it again", generation,
        r.status().message());
    absl::MutexLock lock(&mu_);
    if (WaitUntil(std::min(deadline, absl::Now() + backoff),
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }) ||
        !WaitUntil(deadline, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return conn_ != nullptr || stop_; }) ||
        stop_) {
      return absl::UnavailableError(absl::StrFormat(
          "barrier %d not passed within %s: the job master at %s went away and did not come "
          "back (%s)", generation, absl::FormatDuration(timeout), CurrentMasterAddress(options_),
          r.status().message()));
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status JobMasterClient::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

bool JobMasterClient::connected() const {
  absl::MutexLock lock(&mu_);
  return conn_ != nullptr;
}

}  // namespace trainyard::jobmaster
