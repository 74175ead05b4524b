// JobManager: client operations, recovery and the bookkeeping shared by the
// other parts (events, persistence, views).
#include "server/job_manager.h"

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "api/convert.h"
#include "server/job_manager_internal.h"
#include "api/job_spec.h"
#include "api/task_env.h"

namespace trainyard::server {

int64_t ToMs(absl::Time t) { return absl::ToUnixMillis(t); }

v1::JobEvent ToView(const v1::JobEventRecord& e) {
  v1::JobEvent v;
  v.set_time_unix_ms(e.time_ms());
  v.set_kind(e.kind());
  v.set_text(e.text());
  return v;
}

JobManager::JobManager(ServerConfig config, StateStore* store,
                       std::unique_ptr<core::Scheduler> scheduler, const Clock* clock)
    : config_(std::move(config)), store_(store), clock_(clock), scheduler_(std::move(scheduler)) {
  started_ = clock_->Now();
}

JobManager::~JobManager() { Stop(); }

void JobManager::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  started_ = clock_->Now();
  thread_ = std::thread([this] { Loop(); });
}

void JobManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // Hand the store everything not yet written, and wait for it: the write's
  // completion calls back into this object.
  std::unique_lock<std::mutex> lock(mu_);
  // Waits as long as the store takes: the write's callback uses this object.
  while (true) {
    while (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !flush_in_flight_; })) {
      Log(LogLevel::kWarning, "server", "stopping: still waiting for the store to answer the last write");
    }
    Flush();
    if (!flush_in_flight_) break;
  }
}

void JobManager::SetServerAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  server_address_ = address;
}

void JobManager::Wake() {
  dirty_ = true;
  cv_.notify_all();
}

absl::Status JobManager::Recover() {
  absl::StatusOr<StoreSnapshot> snap = store_->LoadAll();
  if (!snap.ok()) return snap.status();
  std::lock_guard<std::mutex> lock(mu_);
  next_job_id_ = snap->max_job_id + 1;
  for (const v1::NodeRecord& n : snap->nodes) {
    auto node = std::make_unique<NodeRt>();
    node->info = n.info();
    node->state = v1::NODE_LOST;  // until its agent reconnects
    node->last_heartbeat = clock_->Now();
    nodes_[n.info().name()] = std::move(node);
  }
  for (const v1::JobRecord& rec : snap->jobs) {
    auto job = std::make_unique<JobRt>();
    job->rec = rec;
    job->events_loaded = false;
    if (!RecoverIntoScheduler(*job)) {
      jobs_[rec.name()] = nullptr;  // left in the store; its name stays taken
      continue;
    }
    jobs_[rec.name()] = std::move(job);
  }
  // Finished jobs stay visible (describe, jobs -a) and keep their names taken:
  // a new job must not get the name of one the store already holds.
  JobFilter finished;
  finished.states = {v1::JOB_SUCCEEDED, v1::JOB_FAILED, v1::JOB_KILLED};
  absl::StatusOr<std::vector<v1::JobRecord>> ended = store_->ListJobs(finished);
  if (!ended.ok()) return ended.status();
  for (v1::JobRecord& rec : *ended) {
    auto job = std::make_unique<JobRt>();
    job->events_loaded = false;
    job->rec = std::move(rec);
    next_job_id_ = std::max(next_job_id_, job->rec.id() + 1);
    // Ended while its tasks were being stopped: they hold their resources
    // until their agents confirm the stop (or no longer have them).
    bool stopping = std::any_of(job->rec.tasks().begin(), job->rec.tasks().end(), [](const v1::TaskRecord& t) {
      return !t.node().empty() && !api::IsTerminal(t.state());
    });
    if (stopping) {
      job->ending = true;
      RecoverIntoScheduler(*job);
    } else {
      LoadTaskState(*job);
    }
    jobs_[job->rec.name()] = std::move(job);
  }
  Log(LogLevel::kInfo, "server", "recovered %d live jobs, %d finished jobs and %d nodes from the store",
      static_cast<int>(snap->jobs.size()), static_cast<int>(ended->size()), static_cast<int>(snap->nodes.size()));
  Wake();
  return absl::OkStatus();
}

void JobManager::LoadTaskState(JobRt& job) {
  const v1::JobRecord& rec = job.rec;
  job.launch_base.assign(rec.tasks_size(), 0);
  job.missing_beats.assign(rec.tasks_size(), 0);
  job.acked.assign(rec.tasks_size(), false);
  for (int i = 0; i < rec.tasks_size(); ++i) {
    // The launch its agent runs (the agent's restarts raised `attempt`); a
    // task not placed waits for a launch at `attempt`.
    const v1::TaskRecord& t = rec.tasks(i);
    job.launch_base[i] = t.node().empty() ? t.attempt() : t.launch_attempt();
    // Running before a restart: its agent had it. A LAUNCHING one may never
    // have reached its agent.
    job.acked[i] = t.state() == v1::TASK_RUNNING || t.state() == v1::TASK_RESTARTING;
  }
}

bool JobManager::RecoverIntoScheduler(JobRt& job) {
  const v1::JobRecord& rec = job.rec;
  LoadTaskState(job);
  for (const v1::TaskRecord& t : rec.tasks()) {
    if (!t.node().empty()) IndexTask(job, t.node());
  }
  absl::StatusOr<core::JobRequest> req = api::ToJobRequest(rec);
  if (!req.ok()) {
    Log(LogLevel::kWarning, "server", "job %s cannot be recovered: %s", rec.name(), std::string(req.status().message()));
    return false;
  }
  bool placed = std::any_of(rec.tasks().begin(), rec.tasks().end(),
                            [](const v1::TaskRecord& t) { return !t.node().empty(); });
  job.job_master = JobMasterAddress(job);  // for tasks launched again after the restart
  if (!scheduler_->AddJob(*req).ok()) return true;
  job.in_scheduler = true;
  if (placed && rec.state() != v1::JOB_QUEUED) {
    // Its tasks are adopted as their nodes come back (AdoptRecoveredTasks).
    auto slot = scheduler_->state().FindJob(rec.name());
    scheduler_->mutable_state().SetPhase(*slot, core::JobPhase::kRunning, absl::FromUnixMillis(rec.start_time_ms()));
    job.recovered_placed = true;
  }
  return true;
}

void JobManager::IndexTask(const JobRt& job, const std::string& node) { node_jobs_[node].insert(job.rec.name()); }

std::vector<std::pair<JobManager::JobRt*, int>> JobManager::TasksOn(const std::string& node) {
  std::vector<std::pair<JobRt*, int>> out;
  auto it = node_jobs_.find(node);
  if (it == node_jobs_.end()) return out;
  for (auto name = it->second.begin(); name != it->second.end();) {
    JobRt* job = FindJob(*name);
    size_t before = out.size();
    for (int i = 0; job && i < job->rec.tasks_size(); ++i) {
      const v1::TaskRecord& t = job->rec.tasks(i);
      if (t.node() == node && !api::IsTerminal(t.state())) out.emplace_back(job, i);
    }
    name = out.size() == before ? it->second.erase(name) : std::next(name);
  }
  return out;
}

absl::Status JobManager::CheckQueue(const std::string& queue) {
  std::vector<const core::QueueConfig*> stack = {&scheduler_->options().queues.root};
  std::vector<std::string> leaves;
  while (!stack.empty()) {
    const core::QueueConfig* q = stack.back();
    stack.pop_back();
    if (q->children.empty()) {
      if (q->name == queue) return absl::OkStatus();
      leaves.push_back(q->name);
    }
    for (const auto& c : q->children) stack.push_back(&c);
  }
  std::sort(leaves.begin(), leaves.end());
  return absl::InvalidArgumentError(absl::StrCat("queue: '", queue, "' is not a leaf queue (known: ",
                                                 absl::StrJoin(leaves, ", "), ")"));
}

void JobManager::AddJobMasterRole(v1::JobSpec* spec, const std::string& name) {
  v1::ReplicaSpec* jm = spec->add_replicas();
  jm->set_role("jobmaster");
  jm->set_count(1);
  jm->mutable_resources()->set_vcores_milli(config_.jobmaster_vcores_milli);
  jm->mutable_resources()->set_memory_mb(config_.jobmaster_memory_mb);
  jm->mutable_resources()->set_port_count(1);
  jm->set_restart_policy(v1::RESTART_ON_FAILURE);
  jm->set_max_restarts(10);
  jm->add_command("sh");
  jm->add_command("-c");
  jm->add_command(absl::StrCat("exec \"", config_.trainyard_binary, "\" jobmaster --job ", name,
                               " --workers ", api::WorkerCount(*spec),
                               " --port \"${TRAINYARD_PORTS%%,*}\" --server ",
                               server_address_.empty() ? config_.listen : server_address_));
  // The master comes first, as the job's first task.
  std::rotate(spec->mutable_replicas()->rbegin(), spec->mutable_replicas()->rbegin() + 1,
              spec->mutable_replicas()->rend());
}

namespace {
// One PENDING task record per replica; workers get ids 0.., then the
// parameter servers and other roles (the job master none).
void AddTaskRecords(const v1::JobSpec& spec, v1::JobRecord* rec) {
  int worker_id = 0;
  for (const auto& rs : spec.replicas()) {
    for (int i = 0; i < rs.count(); ++i) {
      v1::TaskRecord* t = rec->add_tasks();
      t->set_role(rs.role());
      t->set_index(i);
      t->set_worker_id(api::IsWorkerRole(rs.role()) ? worker_id++ : -1);
      t->set_state(v1::TASK_PENDING);
    }
  }
  int ps_id = worker_id;
  for (auto& t : *rec->mutable_tasks()) {
    if (t.worker_id() < 0 && t.role() != "jobmaster") t.set_worker_id(ps_id++);
  }
}
}  // namespace

absl::StatusOr<v1::SubmitResponse> JobManager::Submit(v1::JobSpec spec) {
  std::promise<absl::StatusOr<v1::SubmitResponse>> promise;
  std::future<absl::StatusOr<v1::SubmitResponse>> result = promise.get_future();
  SubmitAsync(std::move(spec), [&promise](absl::StatusOr<v1::SubmitResponse> r) { promise.set_value(std::move(r)); });
  return result.get();
}

void JobManager::SubmitAsync(v1::JobSpec spec, SubmitDone done) {
  absl::StatusOr<PreparedJob> prepared = PrepareSubmit(std::move(spec));
  if (!prepared.ok()) {
    done(prepared.status());
    return;
  }
  WriteBatch batch;
  batch.CreateJob(prepared->rec, prepared->first_event);
  auto shared = std::make_shared<PreparedJob>(std::move(*prepared));
  store_->CommitAsync(std::move(batch), [this, shared, done = std::move(done)](absl::Status st) {
    done(AcceptCommitted(*shared, st));
  });
}

absl::StatusOr<JobManager::PreparedJob> JobManager::PrepareSubmit(v1::JobSpec spec) {
  if (spec.user().empty()) spec.set_user("default");
  if (spec.queue().empty()) spec.set_queue("default");
  std::vector<std::string> problems = api::ValidateJobSpec(spec, config_.limits);
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  // Frameworks address tasks by port: make sure each task that needs one has one.
  for (auto& rs : *spec.mutable_replicas()) {
    bool needs = spec.framework() == v1::FRAMEWORK_TENSORFLOW ||
                 (spec.framework() == v1::FRAMEWORK_PYTORCH && (rs.role() == "master" || rs.role() == "worker"));
    if (needs && rs.resources().port_count() == 0 && rs.resources().ports().empty()) {
      rs.mutable_resources()->set_port_count(1);
    }
  }
  v1::JobRecord rec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status st = CheckQueue(spec.queue()); !st.ok()) return st;
    std::string name = spec.name();
    if (jobs_.count(name)) {
      int& n = next_suffix_[spec.name()];
      if (n < 2) n = 2;
      while (jobs_.count(absl::StrCat(spec.name(), "-", n))) ++n;
      name = absl::StrCat(spec.name(), "-", n++);
    }
    spec.set_name(name);
    if (config_.jobmaster_enabled && api::WorkerCount(spec) > 0 && spec.job_master_address().empty()) {
      AddJobMasterRole(&spec, name);
    }
    rec.set_id(next_job_id_++);
    rec.set_name(name);
    *rec.mutable_spec() = spec;
    absl::StatusOr<core::JobRequest> req = api::ToJobRequest(rec);
    if (!req.ok()) return req.status();
    if (absl::Status st = core::ValidateJob(*req); !st.ok()) return absl::InvalidArgumentError(st.message());
    jobs_[name] = nullptr;  // reserves the name until the record is durable
  }
  rec.set_state(v1::JOB_QUEUED);
  rec.set_submit_time_ms(ToMs(clock_->Now()));
  rec.set_pending_reason("waiting for the scheduler");
  AddTaskRecords(spec, &rec);
  PreparedJob out;
  v1::JobEventRecord& ev = out.first_event;
  ev.set_job_id(rec.id());
  ev.set_time_ms(rec.submit_time_ms());
  ev.set_kind("submitted");
  ev.set_text(absl::StrCat("submitted by ", spec.user(), " to queue ", spec.queue(), " (",
                           rec.tasks_size(), " tasks, priority ", api::PriorityName(spec.priority()), ")"));
  out.rec = std::move(rec);
  return out;
}

absl::StatusOr<v1::SubmitResponse> JobManager::AcceptCommitted(PreparedJob& prepared, const absl::Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!st.ok()) {
    jobs_.erase(prepared.rec.name());
    return absl::UnavailableError(absl::StrCat("the job was not accepted: the store cannot keep it: ",
                                               st.message()));
  }
  auto job = std::make_unique<JobRt>();
  job->rec = std::move(prepared.rec);
  const v1::JobRecord& rec = job->rec;
  LoadTaskState(*job);  // a new job: every task PENDING at attempt 0
  job->events.push_back(ToView(prepared.first_event));
  absl::Status added = scheduler_->AddJob(*api::ToJobRequest(rec));
  if (added.ok()) {
    job->in_scheduler = true;
  } else {
    job->rec.set_state(v1::JOB_FAILED);
    job->rec.set_message(absl::StrCat("the scheduler refused the job: ", added.message()));
    Persist(*job);
  }
  ++stats_.submitted;
  v1::SubmitResponse resp;
  resp.set_job(rec.name());
  resp.set_job_id(rec.id());
  jobs_[rec.name()] = std::move(job);
  Wake();
  return resp;
}

JobManager::JobRt* JobManager::FindJob(const std::string& name) {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

int JobManager::FindTask(const JobRt& job, const std::string& role, int index) const {
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    if (job.rec.tasks(i).role() == role && job.rec.tasks(i).index() == index) return i;
  }
  return -1;
}

void JobManager::AddEvent(JobRt& job, const std::string& kind, const std::string& text, absl::Time now) {
  v1::JobEventRecord ev;
  ev.set_job_id(job.rec.id());
  ev.set_time_ms(ToMs(now));
  ev.set_kind(kind);
  ev.set_text(text);
  job.events.push_back(ToView(ev));
  batch_.AppendEvent(std::move(ev));
  // Every job is scheduled and started; at thousands of jobs a second those
  // lines would cost more than the work. They stay in the job's events.
  bool routine = kind == "scheduled" || kind == "started";
  Log(routine ? LogLevel::kDebug : LogLevel::kInfo, "server", "job %s: %s", job.rec.name(), text);
}

void JobManager::Persist(JobRt& job) { dirty_jobs_.insert(job.rec.name()); }

void JobManager::Flush() {
  // One write in flight at a time: changes made meanwhile gather (a job
  // changed three times is written once) and go when it completes.
  if (flush_in_flight_) return;
  std::vector<std::string> names(dirty_jobs_.begin(), dirty_jobs_.end());
  for (const std::string& name : names) {
    JobRt* job = FindJob(name);
    if (job) batch_.UpdateJob(job->rec);
  }
  dirty_jobs_.clear();
  std::vector<std::string> node_names(dirty_nodes_.begin(), dirty_nodes_.end());
  for (const std::string& name : node_names) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) continue;
    const NodeRt& node = *it->second;
    v1::NodeRecord rec;
    *rec.mutable_info() = node.info;
    rec.mutable_info()->set_state(node.state);
    rec.set_registered_time_ms(ToMs(node.registered));
    rec.set_last_seen_ms(ToMs(node.last_heartbeat));
    batch_.PutNode(std::move(rec));
  }
  dirty_nodes_.clear();
  if (batch_.empty()) return;
  WriteBatch batch;
  std::swap(batch, batch_);
  flush_in_flight_ = true;
  uint64_t seq = ++flush_seq_sent_;
  // True while this thread is inside the CommitAsync below: a store that
  // answers at once (it refuses the write) runs the callback here, where
  // mu_ is already held.
  static thread_local bool committing = false;
  committing = true;
  store_->CommitAsync(std::move(batch), [this, seq, names = std::move(names),
                                        node_names = std::move(node_names)](absl::Status st) {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!committing) lock.lock();
    FlushDone(seq, names, st);
    if (!st.ok() && !stopping_) dirty_nodes_.insert(node_names.begin(), node_names.end());
    // After a failure the next try waits for the next round (a tick at most).
    if (!committing && st.ok()) Flush();
    cv_.notify_all();
  });
  committing = false;
}

void JobManager::FlushDone(uint64_t seq, const std::vector<std::string>& names, const absl::Status& st) {
  flush_in_flight_ = false;
  flush_seq_done_ = seq;
  if (st.ok()) {
    if (!flush_error_.ok()) Log(LogLevel::kInfo, "server", "store writes succeed again");
    flush_error_ = absl::OkStatus();
    return;
  }
  if (flush_error_.ok()) {
    Log(LogLevel::kError, "server", "store write failed: %s; the jobs it held are written again on the next try",
        std::string(st.message()));
  }
  flush_error_ = st;
  failed_flushes_.insert(seq);
  while (failed_flushes_.size() > 1024) failed_flushes_.erase(failed_flushes_.begin());
  // Their records go again with a later write (the whole record, so the
  // state is kept; the events of this write are lost).
  if (!stopping_) dirty_jobs_.insert(names.begin(), names.end());
}

absl::Status JobManager::WaitDurable(std::unique_lock<std::mutex>& lock) {
  uint64_t sent = flush_seq_sent_;
  bool pending = !dirty_jobs_.empty() || !dirty_nodes_.empty() || !batch_.empty();
  Flush();
  uint64_t target;
  if (flush_seq_sent_ > sent) {
    target = flush_seq_sent_;  // this Flush sent it
  } else if (pending) {
    target = flush_seq_sent_ + 1;  // a write is in flight; it goes with the next
  } else if (flush_in_flight_) {
    target = flush_seq_sent_;  // the write in flight may hold it
  } else {
    return absl::OkStatus();  // nothing waits to be written
  }
  if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return flush_seq_done_ >= target; })) {
    return absl::DeadlineExceededError("the store did not confirm the write in 10 s");
  }
  if (failed_flushes_.count(target)) return flush_error_.ok() ? absl::UnavailableError("the write failed") : flush_error_;
  return absl::OkStatus();
}

void JobManager::SetJobState(JobRt& job, v1::JobState state, absl::Time now) {
  if (job.rec.state() == state) return;
  job.rec.set_state(state);
  if (state == v1::JOB_RUNNING && job.rec.start_time_ms() == 0) job.rec.set_start_time_ms(ToMs(now));
  if (api::IsTerminal(state)) job.rec.set_end_time_ms(ToMs(now));
  Persist(job);
}

absl::StatusOr<v1::JobView> JobManager::Describe(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  return View(*job, /*with_events=*/true);
}

std::vector<v1::JobView> JobManager::ListJobs(bool include_finished) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::JobView> out;
  for (auto& [name, job] : jobs_) {
    if (!job || (!include_finished && api::IsTerminal(job->rec.state()))) continue;
    out.push_back(View(*job, false));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id() < b.id(); });
  return out;
}

v1::JobView JobManager::View(const JobRt& job, bool with_events) {
  v1::JobView v;
  const v1::JobRecord& r = job.rec;
  v.set_name(r.name());
  v.set_id(r.id());
  v.set_user(r.spec().user());
  v.set_queue(r.spec().queue());
  v.set_priority(r.spec().priority());
  v.set_framework(r.spec().framework());
  v.set_state(r.state());
  v.set_reason(r.state() == v1::JOB_QUEUED ? r.pending_reason() : r.message());
  v.set_submit_time_unix_ms(r.submit_time_ms());
  v.set_start_time_unix_ms(r.start_time_ms());
  v.set_end_time_unix_ms(r.end_time_ms());
  v.set_job_master(job.job_master);
  int gpus = 0;
  for (const auto& t : r.tasks()) {
    v1::TaskView* tv = v.add_tasks();
    tv->set_name(api::TaskName(r.name(), t.role(), t.index()));
    tv->set_role(t.role());
    tv->set_index(t.index());
    tv->set_worker_id(t.worker_id());
    tv->set_node(t.node());
    auto nit = nodes_.find(t.node());
    if (nit != nodes_.end()) {
      tv->set_node_address(nit->second->info.address());
      tv->set_node_gpu_count(nit->second->info.topology().gpu_count());
    }
    tv->set_gpu_mask(t.allocation().gpu_mask());
    *tv->mutable_ports() = t.allocation().ports();
    tv->set_state(t.state());
    tv->set_restarts(t.restart_count());
    tv->set_attempt(t.attempt());
    *tv->mutable_last_exit() = t.exit();
    tv->set_memory_mb(t.allocation().memory_mb());
    tv->set_vcores_milli(t.allocation().vcores_milli());
    if (!t.node().empty() && !api::IsTerminal(t.state())) gpus += t.allocation().gpus();
  }
  v.set_gpus(gpus);
  if (with_events) {
    JobRt& mutable_job = const_cast<JobRt&>(job);
    if (!job.events_loaded) {
      // Events written before a restart, then those since.
      auto stored = store_->ListEvents(r.id());
      if (stored.ok()) {
        std::vector<v1::JobEvent> all;
        for (const auto& e : *stored) all.push_back(ToView(e));
        // Events appended after recovery may already be in the store too.
        for (const auto& e : job.events) {
          bool dup = std::any_of(all.begin(), all.end(), [&](const v1::JobEvent& o) {
            return o.time_unix_ms() == e.time_unix_ms() && o.kind() == e.kind() && o.text() == e.text();
          });
          if (!dup) all.push_back(e);
        }
        mutable_job.events = std::move(all);
        mutable_job.events_loaded = true;
      }
    }
    for (const auto& e : job.events) *v.add_events() = e;
  }
  return v;
}

absl::StatusOr<v1::JobState> JobManager::Kill(const std::string& name, const std::string& reason) {
  std::unique_lock<std::mutex> lock(mu_);
  JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  // A job that has already ended is answered too once its end is durable.
  if (!api::IsTerminal(job->rec.state())) {
    EndJob(*job, v1::JOB_KILLED, reason.empty() ? "killed by the user" : reason, clock_->Now());
  }
  v1::JobState state = job->rec.state();
  // Answered once the end is durable, as a submission is.
  if (absl::Status st = WaitDurable(lock); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("job ", name, " is being stopped, but the server cannot record it: ",
                                               st.message(), " (after a server restart it is back as it was last recorded)"));
  }
  return state;
}

void JobManager::EndJob(JobRt& job, v1::JobState state, const std::string& message, absl::Time now) {
  if (job.ending) return;
  job.ending = true;
  job.preempting = false;
  preempting_.erase(job.rec.name());
  job.rec.set_message(message);
  job.rec.set_pending_reason("");
  SetJobState(job, state, now);
  AddEvent(job, "finished", absl::StrCat(api::JobStateName(state), ": ", message), now);
  // Tasks never placed are done at once; the others are stopped.
  for (auto& t : *job.rec.mutable_tasks()) {
    if (t.node().empty() && !api::IsTerminal(t.state())) t.set_state(v1::TASK_KILLED);
  }
  KillTasks(job, config_.kill_grace_ms, message);
  MaybeFinish(job, now);
  Wake();
}

void JobManager::MaybeFinish(JobRt& job, absl::Time now) {
  for (const auto& t : job.rec.tasks()) {
    if (!api::IsTerminal(t.state())) return;
  }
  if (job.preempting) {
    Requeue(job, absl::StrCat("preempted by ", job.preempted_by), now);
    return;
  }
  if (job.ending && job.in_scheduler) {
    (void)scheduler_->RemoveJob(job.rec.name());
    job.in_scheduler = false;
    Wake();
  }
}

void JobManager::Requeue(JobRt& job, const std::string& reason, absl::Time now) {
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    v1::TaskRecord* t = job.rec.mutable_tasks(i);
    if (!api::IsTerminal(t->state()) && !t->node().empty()) {
      v1::KillTask kill;
      auto nit = nodes_.find(t->node());
      if (nit != nodes_.end() && nit->second->link) {
        v1::ServerMessage msg;
        msg.mutable_kill()->set_job(job.rec.name());
        msg.mutable_kill()->set_role(t->role());
        msg.mutable_kill()->set_index(t->index());
        msg.mutable_kill()->set_grace_ms(0);
        msg.mutable_kill()->set_reason(reason);
        nit->second->link->Send(std::move(msg));
      }
    }
    t->set_node("");
    t->clear_allocation();
    t->set_state(v1::TASK_PENDING);
    t->set_attempt(t->attempt() + 1);
    job.launch_base[i] = t->attempt();
  }
  if (job.in_scheduler) (void)scheduler_->RequeueJob(job.rec.name());
  job.preempting = false;
  preempting_.erase(job.rec.name());
  job.job_master.clear();
  job.rec.set_pending_reason(reason);
  SetJobState(job, v1::JOB_QUEUED, now);
  AddEvent(job, "requeued", absl::StrCat("back in the queue: ", reason), now);
  Persist(job);
  Wake();
}

absl::Status JobManager::ReportOutcome(const v1::JobOutcomeRequest& req) {
  std::unique_lock<std::mutex> lock(mu_);
  JobRt* job = FindJob(req.job());
  if (!job) return absl::NotFoundError(absl::StrCat("job '", req.job(), "' does not exist"));
  if (req.state() != v1::JOB_SUCCEEDED && req.state() != v1::JOB_FAILED) {
    return absl::InvalidArgumentError("state: must be JOB_SUCCEEDED or JOB_FAILED");
  }
  bool master_task = FindTask(*job, "jobmaster", 0) >= 0;
  if (master_task && !req.master_address().empty() && req.master_address() != job->job_master) {
    // A master cut off on a lost node, still running: its verdict is stale.
    return absl::FailedPreconditionError(absl::StrCat("job ", req.job(), ": the job master at ", req.master_address(),
                                                      " was replaced by the one at ", job->job_master,
                                                      "; its verdict is ignored"));
  }
  if (api::IsTerminal(job->rec.state()) || job->ending) return WaitDurable(lock);
  std::string msg = req.reason().empty()
                        ? (req.state() == v1::JOB_SUCCEEDED ? "all workers completed" : "the job master reported failure")
                        : req.reason();
  EndJob(*job, req.state(), msg, clock_->Now());
  // Answered once durable: the job master retries a report that failed.
  if (absl::Status st = WaitDurable(lock); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("the outcome of job ", req.job(), " cannot be recorded: ", st.message()));
  }
  return absl::OkStatus();
}

std::vector<v1::NodeView> JobManager::ListNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::NodeView> out;
  const core::ClusterState& cs = scheduler_->state();
  for (auto& [name, node] : nodes_) {
    v1::NodeView v;
    *v.mutable_info() = node->info;
    v.mutable_info()->set_state(node->state);
    v.set_ports_in_use(static_cast<int>(node->ports_in_use.Count()));
    v.set_last_heartbeat_unix_ms(ToMs(node->last_heartbeat));
    if (auto id = cs.FindNode(name); id && node->in_scheduler) {
      const core::NodeState& ns = cs.node(*id);
      v.set_free_gpu_mask(ns.free.gpu_mask);
      v.set_free_memory_mb(ns.free.memory_mb);
      v.set_free_vcores_milli(ns.free.vcores_milli);
      for (const core::NodeTask& nt : ns.tasks) {
        const core::JobState& js = cs.job(nt.job);
        const core::PlacedTask& pt = js.tasks[nt.pos];
        v.add_tasks(api::TaskName(js.request.id, js.request.roles[pt.role].name, pt.index));
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

v1::ListQueuesResponse JobManager::ListQueues() {
  std::lock_guard<std::mutex> lock(mu_);
  v1::ListQueuesResponse resp;
  const core::ClusterState& cs = scheduler_->state();
  *resp.mutable_cluster() = api::ToProto(cs.ClusterCapacity());
  std::map<std::string, std::pair<int, int>> counts;  // running, pending
  for (auto& [name, job] : jobs_) {
    if (!job || api::IsTerminal(job->rec.state())) continue;
    auto& c = counts[job->rec.spec().queue()];
    (job->rec.state() == v1::JOB_QUEUED ? c.second : c.first)++;
  }
  std::vector<std::pair<const core::QueueConfig*, double>> stack = {{&scheduler_->options().queues.root, 100.0}};
  while (!stack.empty()) {
    auto [q, parent_abs] = stack.back();
    stack.pop_back();
    double abs_cap = parent_abs * q->capacity_percent / 100.0;
    double abs_max = parent_abs * q->max_capacity_percent / 100.0;
    for (const auto& c : q->children) stack.push_back({&c, abs_cap});
    if (!q->children.empty()) continue;
    v1::QueueView* v = resp.add_queues();
    v->set_name(q->name);
    v->set_capacity_percent(abs_cap);
    v->set_max_capacity_percent(abs_max);
    v->set_weight(q->weight);
    const auto& names = cs.queue_names();
    auto it = std::find(names.begin(), names.end(), q->name);
    if (it != names.end()) *v->mutable_used() = api::ToProto(cs.QueueUsed(static_cast<int32_t>(it - names.begin())));
    v->set_running_jobs(counts[q->name].first);
    v->set_pending_jobs(counts[q->name].second);
  }
  std::sort(resp.mutable_queues()->begin(), resp.mutable_queues()->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return resp;
}

ManagerStats JobManager::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace trainyard::server
