// JobManager: the shell — lock, loop thread, store writes, durability and
// log waits — around ControlState (see job_manager.h).
#include "server/job_manager.h"

#include <algorithm>
#include <chrono>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/roles.h"
#include "api/states.h"
#include "common/check.h"
#include "common/logging.h"
#include "store/etcd_state_store.h"

namespace trainyard::server {
namespace {
// How often the loop wakes without an event: preemption deadlines and node
// liveness are checked at this pace.
constexpr absl::Duration kTick = absl::Milliseconds(100);
// A gap between two loop runs longer than this is the server's own stall
// (stopped, starved of CPU): nodes are not judged by the silence it caused.
constexpr absl::Duration kStall = absl::Seconds(1);
}  // namespace

JobManager::JobManager(ServerConfig config, StateStore* store, std::unique_ptr<core::Scheduler> scheduler,
                       ExecutionBackend* backend, const Clock* clock)
    : config_(config),
      store_(store),
      clock_(clock),
      queues_(scheduler->options().queues.root),
      contract_(backend, &secrets_),
      control_(std::move(config), std::move(scheduler), &contract_, clock->Now()) {
  views_.resources().Configure(config_.task_sample_max_tasks, absl::Milliseconds(config_.task_sample_interval_ms));
  views_.accounts().SetLimits({.retention = absl::Hours(24) * config_.accounting_retention_days,
                               .max_jobs = static_cast<size_t>(config_.accounting_max_jobs)});
}

JobManager::~JobManager() { Stop(); }

JobManager::Turn::Turn(JobManager* m) : m_(m) {
  m_->mu_.Lock();
  TY_CHECK(m_->effects_.empty(), "a turn began with effects another hold of the lock left");
}

JobManager::Turn::~Turn() {
  if (m_->effects_.empty()) {  // most agent reports: nothing to send
    m_->mu_.Unlock();
    return;
  }
  Effects effects = std::move(m_->effects_);
  m_->effects_ = Effects();
  m_->mu_.Unlock();
  m_->RunEffects(std::move(effects));
}

void JobManager::RunEffects(Effects effects) {
  if (effects.write) SendWrite(*std::move(effects.write));
  // Their views are published: describe right after sees them.
  for (auto& [done, resp] : effects.answers) done(std::move(resp));
  SubmitScheduled(std::move(effects.fires));
}

absl::Status JobManager::Recover() {
  absl::StatusOr<StoreSnapshot> snap = store_->LoadAll();
  if (!snap.ok()) return snap.status();
  JobFilter finished;
  finished.states = api::FinishedJobStates();
  absl::StatusOr<std::vector<v1::JobRecord>> ended = store_->ListJobs(finished);
  if (!ended.ok()) return ended.status();
  size_t live = snap->jobs.size(), done = ended->size(), nodes = snap->nodes.size();
  Turn turn(this);
  control_.Recover(std::move(*snap), std::move(*ended), clock_->Now());
  Log(LogLevel::kInfo, "server", "recovered %d live jobs, %d finished jobs and %d nodes from the store",
      static_cast<int>(live), static_cast<int>(done), static_cast<int>(nodes));
  // Node and queue views wait for the loop's first turn (Start), after its
  // first round: every recovered node is LOST until its agent returns, and
  // building the views of 10,000 nodes here delayed listening by 30 ms.
  // (Between listening and Start, a `nodes` would list none.)
  PublishStats();
  recovered_unpublished_ = control_.PublishRecovered(&views_, 0) > 0;
  AfterEvent();
  return absl::OkStatus();
}

void JobManager::PublishWaitingViews() {
  if (!recovered_unpublished_ && !job_views_held_) return;
  Turn turn(this);
  if (recovered_unpublished_) {
    control_.PublishRecovered(&views_, SIZE_MAX);
    recovered_unpublished_ = false;
  }
  if (job_views_held_) PublishJobsPaced();
}

void JobManager::Start() {
  Turn turn(this);
  last_loop_ = clock_->Now();
  loop_running_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void JobManager::Stop() {
  {
    Turn turn(this);
    stopping_ = true;
    cv_.SignalAll();
    loop_cv_.Signal();
  }
  if (thread_.joinable()) thread_.join();
  {
    // Submissions durable after the loop's last turn are taken in and
    // answered; those the store has not answered yet are taken in by its
    // answer (OnCommitted: their callbacks call into this object, which
    // must outlive them).
    Turn turn(this);
    loop_running_ = false;
    TakeInCommitted();
    control_.PublishJobs(&views_);
  }
  {
    absl::MutexLock lock(&mu_);
    while (!WaitFor(absl::Seconds(10), [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return submissions_unanswered_by_store_ == 0; })) {
      Log(LogLevel::kWarning, "server", "stopping: still waiting for the store to answer %d submissions",
          submissions_unanswered_by_store_);
    }
  }
  // Hand the store everything not yet written, and wait for it: the write's
  // answer calls back into this object.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (!WaitFor(absl::Seconds(10), [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !control_.persister().in_flight(); })) {
        Log(LogLevel::kWarning, "server", "stopping: still waiting for the store to answer the last write");
      }
    }
    bool taken = false;
    {
      Turn turn(this);
      TakeWrite();
      taken = effects_.write.has_value();
      if (!taken && !control_.persister().in_flight()) break;  // nothing left to write
    }
    if (!taken) continue;  // another's write is in flight: wait for it
    // Sent as the turn ended. Answered already (a store that answers at
    // once): a success took the next write then, a failure is not tried
    // again while stopping.
    absl::MutexLock lock(&mu_);
    if (!control_.persister().in_flight()) break;
  }
}

void JobManager::SetServerAddress(const std::string& address) {
  Turn turn(this);
  control_.SetServerAddress(address);
}

void JobManager::SetJobCredentials(TaskSecrets::JobCredentials of, TaskSecrets::JobCredentials worker_secret_of,
                                   TaskSecrets::JobCredentials user_token_of) {
  Turn turn(this);
  secrets_.SetJobCredentials(std::move(of), std::move(worker_secret_of), std::move(user_token_of));
}

std::optional<std::string> JobManager::LiveJobUser(uint64_t id) {
  // After a restart, the recovered jobs' views come with the first rounds:
  // a job that runs on is not taken for one that ended.
  PublishWaitingViews();
  return views_.LiveJobUser(id);
}

void JobManager::WakeIfAsked() {
  if (control_.TakeRoundRequest()) {
    round_asked_ = true;
    loop_cv_.Signal();
  } else if (loop_sleeps_until_ > next_publish_ && control_.NodeViewsChanged()) {
    // The loop went to sleep with no node or queue view changed: what changed
    // since (a task that ended with nothing waiting for room asks for no
    // round) goes out when it is due, not a tick later.
    loop_sleeps_until_ = absl::InfinitePast();
    loop_cv_.Signal();
  }
}

void JobManager::AfterEvent() {
  WakeIfAsked();
  control_.PublishJobs(&views_);
  job_views_held_ = false;
  TakeWrite();
}

void JobManager::AfterAgentEvent() {
  WakeIfAsked();
  // Real time: the pace is about the CPU the builds take.
  if (absl::Now() >= next_job_publish_) {
    PublishJobsPaced();
  } else if (control_.JobViewsChanged()) {
    // Put out by the next report after the pace, a reader, or the loop's
    // next turn (at most a tick away): the loop is not woken for them, or
    // a big job's reports would turn it into a round per report.
    job_views_held_ = true;
  }
  TakeWrite();
}

void JobManager::PublishJobsPaced() {
  absl::Time start = absl::Now();
  control_.PublishJobs(&views_);
  job_views_held_ = false;
  absl::Time end = absl::Now();
  next_job_publish_ = end + std::max(absl::Milliseconds(2), 20 * (end - start));
}

void JobManager::Loop() {
  while (true) {
    // One turn each time round: what it leaves (the write, the answers, the
    // schedules' runs) runs when the turn ends, before the next one waits.
    Turn turn(this);
    if (stopping_) break;
    // Node and queue views that changed but were not due yet go out when
    // they are due, not a whole tick later.
    absl::Duration wait = kTick;
    if (control_.NodeViewsChanged()) wait = std::min(wait, std::max(absl::ZeroDuration(), next_publish_ - clock_->Now()));
    // Its own condition variable: a store answer (cv_) wakes those who
    // wait for it, not a round.
    if (!round_asked_ && !stopping_) {
      loop_sleeps_until_ = clock_->Now() + wait;
      loop_cv_.WaitWithTimeout(&mu_, wait);
      loop_sleeps_until_ = absl::InfinitePast();
    }
    if (stopping_) break;
    round_asked_ = false;
    // Submissions durable since the last turn: the round below places them.
    TakeInCommitted();
    control_.TakeRoundRequest();  // this turn's round is that round
    absl::Time now = clock_->Now();
    if (now - last_loop_ > kStall) {
      Log(LogLevel::kWarning, "server", "the server did not run for %s; nodes get that time back before they are judged",
          absl::FormatDuration(now - last_loop_));
      control_.ExcuseStall(now - last_loop_);
    }
    if (order_fence_) order_fence_();  // a paused leader that woke deposed goes before its round
    ExcuseOverloadLocked(now);
    last_loop_ = now;
    auto round_start = std::chrono::steady_clock::now();
    control_.RunRound(now);
    round_seconds_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - round_start).count());
    effects_.fires = TakeScheduleWork(now);
    if (now >= next_resource_prune_) {  // samples of tasks gone, also when no report comes
      views_.resources().Prune(now);
      next_resource_prune_ = now + absl::Minutes(1);
    }
    if (now >= next_publish_) {
      // Node and queue views cover the whole cluster; publishing them takes
      // at most 1% of the loop's time (2% while the recovered jobs' views
      // go out, a thousand at a time), and happens at most every 5 ms (only
      // the nodes that changed are built again). Under load that is a few
      // times a second: a node changed by many jobs meanwhile is built once.
      absl::Time start = absl::Now();
      int share = recovered_unpublished_ ? 50 : 100;
      if (recovered_unpublished_) recovered_unpublished_ = control_.PublishRecovered(&views_, 1000) > 0;
      control_.PublishNodesAndQueues(&views_, clock_->Now());
      PublishStats();
      next_publish_ = now + std::max(absl::Milliseconds(5), share * (absl::Now() - start));
    }
    AfterEvent();  // what the round changed may place more at once
  }
}

void JobManager::SetOverloadProbe(std::function<int64_t()> probe) { overload_probe_ = std::move(probe); }

void JobManager::SetOrderFence(std::function<void()> check) {
  order_fence_ = std::move(check);
}

void JobManager::ExcuseOverloadLocked(absl::Time now) {
  if (!overload_probe_) return;
  int64_t count = overload_probe_();
  if (count == last_overload_count_) return;
  last_overload_count_ = count;
  control_.ExcuseOverload(now - last_loop_, now);
  if (now - last_overload_log_ > absl::Seconds(10)) {
    last_overload_log_ = now;
    Log(LogLevel::kWarning, "server",
        "the server's gRPC doors are saturated (connections refused); nodes are not judged by the heartbeats it may "
        "not have read meanwhile (for at most %d node timeouts)",
        ControlState::kOverloadSilenceFactor);
  }
}

void JobManager::ScheduleNowForTest() {
  Turn turn(this);
  control_.RunRound(clock_->Now());
  effects_.fires = TakeScheduleWork(clock_->Now());
  control_.PublishNodesAndQueues(&views_, clock_->Now());
  PublishStats();
  AfterEvent();
}

void JobManager::PublishStats() {
  auto stats = std::make_shared<PublishedStats>();
  stats->manager = control_.Stats();
  // The store's own small lock, held only to copy its counters; the store
  // never waits for this lock while holding it.
  stats->store = store_->Stats();
  stats->round_seconds = round_seconds_;
  stats->agents_connected = static_cast<int>(contract_.Connected());
  views_.PutStats(std::move(stats));
}

const ViewStore& JobManager::Views() {
  PublishWaitingViews();
  return views_;
}

void JobManager::TakeWrite() {
  if (effects_.write) return;  // taken already: one in flight at a time
  effects_.write = control_.TakeWrite();
}

void JobManager::SendWrite(Persister::Write write) {
  auto w = std::make_shared<WriteInParts>();
  w->write = std::move(write);
  WriteBatch batch = std::move(w->write.batch);
  if (config_.store.empty()) {
    w->parts.push_back(std::move(batch));
  } else {
    // On etcd a write may pass what one transaction holds (everything that
    // changed since the last write: under load thousands of keys). It goes
    // as several batches, in order, each sent once the one before it
    // succeeded. Orders wait for the whole write, as for one batch. Records
    // with a task LAUNCHING (placements) go last, after the records that
    // only release, so a leader that dies between two batches leaves those
    // releases in etcd before the placements written with them.
    std::vector<WriteBatch::Op> ops = batch.TakeOps();
    std::stable_partition(ops.begin(), ops.end(), [](const WriteBatch::Op& op) {
      const auto* update = std::get_if<WriteBatch::UpdateJobOp>(&op);
      return update == nullptr || std::none_of(update->job.tasks().begin(), update->job.tasks().end(),
                                               [](const v1::TaskRecord& t) { return t.state() == v1::TASK_LAUNCHING; });
    });
    for (WriteBatch::Op& op : ops) batch.Add(std::move(op));
    w->parts = SplitForEtcd(std::move(batch), config_.etcd_max_txn_ops, config_.etcd_max_request_bytes,
                            config_.etcd_prefix.size());
  }
  CommitPart(std::move(w));
}

void JobManager::CommitPart(std::shared_ptr<WriteInParts> w) {
  WriteBatch part = std::move(w->parts[w->next++]);
  store_->CommitAsync(std::move(part), [this, w](absl::Status st) {
    {
      Turn turn(this);
      if (!st.ok() || w->next == w->parts.size()) {
        control_.WriteDone(w->write, st, stopping_);
        WakeIfAsked();  // what the answer released may let a round place more
        // What gathered meanwhile goes when this turn ends; after a failure
        // the next try waits for the next round (a tick at most).
        if (st.ok()) TakeWrite();
        cv_.SignalAll();
        return;
      }
    }
    CommitPart(w);
  });
}

std::optional<uint64_t> JobManager::TakeDurableTarget() {
  Persister& p = control_.persister();
  uint64_t sent = p.sent();
  bool pending = p.pending();
  TakeWrite();
  return p.DurableTarget(sent, pending);
}

absl::Status JobManager::AwaitDurable(std::optional<uint64_t> target) {
  if (!target) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  Persister& p = control_.persister();
  if (!WaitFor(absl::Seconds(10), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return p.Answered(*target); })) {
    return absl::DeadlineExceededError("the store did not confirm the write in 10 s");
  }
  return p.ResultOf(*target);
}

absl::StatusOr<v1::JobView> JobManager::Describe(const std::string& name) {
  PublishWaitingViews();
  std::optional<ViewStore::JobEntry> entry = views_.Job(name);
  if (!entry) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  if (entry->events_loaded) return ViewStore::FullView(*entry);
  // A job recovered from the store: its earlier events are read there once,
  // then published with it.
  auto stored = store_->ListEvents(entry->view->id());
  if (!stored.ok()) return ViewStore::FullView(*entry);
  Turn turn(this);
  control_.SetStoredEvents(name, *stored);
  control_.PublishJobs(&views_);
  return control_.Describe(name);
}

std::shared_ptr<const v1::JobView> JobManager::JobSummary(const std::string& name) {
  PublishWaitingViews();
  std::optional<ViewStore::JobEntry> entry = views_.Job(name);
  return entry ? entry->view : nullptr;
}

std::vector<v1::JobView> JobManager::ListJobs(bool include_finished) {
  PublishWaitingViews();
  std::vector<v1::JobView> out;
  for (const auto& v : views_.Jobs(include_finished)) out.push_back(*v);
  return out;
}

absl::StatusOr<v1::ListJobsResponse> JobManager::ListJobs(const v1::ListJobsRequest& req) {
  constexpr int kDefaultPage = 500, kMaxPage = 5000;
  constexpr size_t kPageBytes = 4 << 20;
  if (req.page_size() < 0) return absl::InvalidArgumentError("page_size: must not be negative");
  int page = req.page_size() == 0 ? kDefaultPage : std::min(req.page_size(), kMaxPage);
  // The token is the id of the last job of the previous page.
  uint64_t after = 0;
  if (!req.page_token().empty() && !absl::SimpleAtoi(req.page_token(), &after)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: '", req.page_token(),
                                                   "' is not a token this server gave (next_page_token)"));
  }
  bool finished = req.include_finished() ||
                  std::any_of(req.states().begin(), req.states().end(),
                              [](int s) { return api::IsTerminal(static_cast<v1::JobState>(s)); });
  PublishWaitingViews();
  v1::ListJobsResponse out;
  size_t bytes = 0;
  std::vector<std::shared_ptr<const v1::JobView>> jobs = views_.Jobs(finished);
  auto it = std::upper_bound(jobs.begin(), jobs.end(), after,
                             [](uint64_t id, const auto& v) { return id < v->id(); });
  for (; it != jobs.end(); ++it) {
    const v1::JobView& v = **it;
    if (!req.user().empty() && v.user() != req.user()) continue;
    if (!req.queue().empty() && v.queue() != req.queue()) continue;
    if (!req.states().empty() && std::find(req.states().begin(), req.states().end(), v.state()) == req.states().end()) {
      continue;
    }
    if (out.jobs_size() == page || (out.jobs_size() > 0 && bytes >= kPageBytes)) {
      out.set_next_page_token(absl::StrCat(out.jobs(out.jobs_size() - 1).id()));
      break;
    }
    v1::JobView* j = out.add_jobs();
    int tasks = 0, running = 0;
    for (const auto& task : v.tasks()) {
      if (api::IsJobMasterRole(task.role())) continue;
      ++tasks;
      running += task.state() == v1::TASK_RUNNING;
    }
    *j = v;
    if (req.without_tasks()) j->clear_tasks();
    j->set_task_count(tasks);
    j->set_running_task_count(running);
    bytes += j->ByteSizeLong();
  }
  return out;
}

absl::StatusOr<v1::HistoryResponse> JobManager::History(const v1::HistoryRequest& req) {
  PublishWaitingViews();
  return views_.accounts().History(req, clock_->Now());
}

absl::StatusOr<v1::UsageResponse> JobManager::Usage(const v1::UsageRequest& req) {
  PublishWaitingViews();
  return views_.accounts().Usage(req, clock_->Now());
}

absl::StatusOr<v1::DeleteJobResponse> JobManager::DeleteJob(const std::string& name) {
  absl::StatusOr<v1::DeleteJobResponse> resp;
  std::optional<uint64_t> durable;
  {
    Turn turn(this);
    resp = control_.DeleteJob(name, clock_->Now());
    if (!resp.ok()) return resp;
    control_.PublishJobs(&views_);
    durable = TakeDurableTarget();
  }
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("job ", name, " is deleted, but the server cannot record it: ",
                                               st.message(), " (its name stays taken until the server restarts)"));
  }
  Turn turn(this);
  control_.ReleaseName(name);
  return resp;
}

absl::StatusOr<v1::NodeAdminResponse> JobManager::AdministerNode(NodeAdmin what, const v1::NodeAdminRequest& req) {
  if (req.gpus_size() > 0 && what != NodeAdmin::kCordon && what != NodeAdmin::kUncordon) {
    return absl::InvalidArgumentError("gpus: only cordon and uncordon take GPUs");
  }
  std::optional<uint64_t> durable;
  v1::NodeAdminResponse resp;
  {
    Turn turn(this);
    absl::Time now = clock_->Now();
    if (absl::Status st = AdministerNodeLocked(what, req, now, &resp); !st.ok()) return st;
    AfterEvent();
    control_.PublishNodesAndQueues(&views_, now);  // `nodes` right after shows it
    durable = TakeDurableTarget();
  }
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("node ", req.node(), ": done, but the server cannot record it: ",
                                               st.message(), " (after a server restart it is back as it was)"));
  }
  Turn turn(this);
  if (std::optional<v1::NodeView> v = control_.NodeViewOf(req.node())) *resp.mutable_node() = std::move(*v);
  return resp;
}

absl::Status JobManager::AdministerNodeLocked(NodeAdmin what, const v1::NodeAdminRequest& req, absl::Time now,
                                             v1::NodeAdminResponse* resp) {
  absl::Status st;
  std::vector<int> gpus(req.gpus().begin(), req.gpus().end());
  switch (what) {
    case NodeAdmin::kCordon:
      st = gpus.empty() ? control_.Cordon(req.node(), req.reason()) : control_.CordonGpus(req.node(), gpus, true);
      break;
    case NodeAdmin::kUncordon:
      st = gpus.empty() ? control_.Uncordon(req.node()) : control_.CordonGpus(req.node(), gpus, false);
      break;
    case NodeAdmin::kRemove: st = control_.RemoveNode(req.node(), now); break;
    case NodeAdmin::kDrain: {
      absl::StatusOr<int> evicted = control_.Drain(req.node(), req.reason(), now);
      st = evicted.status();
      if (evicted.ok()) resp->set_evicted(*evicted);
      break;
    }
  }
  return st;
}

std::vector<v1::NodeView> JobManager::ListNodes() {
  ViewStore::NodesPtr nodes = views_.Nodes();
  std::vector<v1::NodeView> out;
  out.reserve(nodes->size());
  for (const auto& n : *nodes) out.push_back(n.Full());
  return out;
}

v1::ListQueuesResponse JobManager::ListQueues() { return *views_.Queues(); }

ManagerStats JobManager::Stats() {
  Turn turn(this);
  return control_.Stats();
}

absl::StatusOr<v1::JobState> JobManager::Kill(const std::string& name, const std::string& reason) {
  absl::StatusOr<v1::JobState> state;
  std::optional<uint64_t> durable;
  {
    Turn turn(this);
    state = control_.Kill(name, reason, clock_->Now());
    if (!state.ok()) return state;
    WakeIfAsked();
    control_.PublishJobs(&views_);
    durable = TakeDurableTarget();
  }
  // Answered once the end is durable, as a submission is (a job that had
  // ended already too).
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("job ", name, " is being stopped, but the server cannot record it: ",
                                               st.message(), " (after a server restart it is back as it was last recorded)"));
  }
  return state;
}

std::vector<std::string> JobManager::DependencyTargets(const std::string& name) {
  Turn turn(this);
  return control_.DependencyTargets(name);
}

absl::StatusOr<std::vector<std::string>> JobManager::Release(const std::string& name) {
  absl::StatusOr<std::vector<std::string>> released;
  std::optional<uint64_t> durable;
  {
    Turn turn(this);
    released = control_.Release(name, clock_->Now());
    if (!released.ok()) return released;
    WakeIfAsked();
    control_.PublishJobs(&views_);
    durable = TakeDurableTarget();
  }
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("job ", name, " is released, but the server cannot record it: ",
                                               st.message(), " (after a server restart it is held again)"));
  }
  return released;
}

absl::Status JobManager::ReportOutcome(const v1::JobOutcomeRequest& req) {
  std::optional<uint64_t> durable;
  {
    Turn turn(this);
    if (absl::Status st = control_.ReportOutcome(req, clock_->Now()); !st.ok()) return st;
    WakeIfAsked();
    control_.PublishJobs(&views_);
    durable = TakeDurableTarget();
  }
  // Answered once durable: the job master retries a report that failed.
  if (absl::Status st = AwaitDurable(durable); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("the outcome of job ", req.job(), " cannot be recorded: ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status JobManager::ReportWorkerFailure(const v1::WorkerFailureRequest& req) {
  Turn turn(this);
  absl::Status st = control_.WorkerFailed(req, clock_->Now());
  AfterEvent();
  return st;
}

absl::Status JobManager::ReportCheckpoint(const v1::CheckpointReport& req) {
  Turn turn(this);
  absl::Status st = control_.CheckpointReported(req, clock_->Now());
  AfterEvent();
  return st;
}

absl::Status JobManager::RegisterAgent(const v1::NodeInfo& info, uint64_t session) {
  Turn turn(this);
  absl::Status st = control_.RegisterAgent(info, session, clock_->Now());
  if (!st.ok()) return st;
  AfterEvent();
  return absl::OkStatus();
}

void JobManager::AgentDisconnected(const std::string& node, uint64_t session) {
  Turn turn(this);
  control_.AgentDisconnected(node, session);
  control_.PublishJobs(&views_);
}

void JobManager::OnHeartbeat(const std::string& node, const v1::Heartbeat& hb) {
  Turn turn(this);
  control_.OnHeartbeat(node, hb, clock_->Now());
  AfterAgentEvent();
}

void JobManager::OnAgentDraining(const std::string& node, const v1::Draining& draining) {
  Turn turn(this);
  control_.AgentDraining(node, draining.reason(), clock_->Now());
  AfterEvent();
}

void JobManager::OnTaskStatus(const std::string& node, const v1::TaskStatus& status) {
  Turn turn(this);
  control_.OnTaskStatus(node, status, clock_->Now());
  AfterAgentEvent();
}

}  // namespace trainyard::server
