// ControlState: jobs — submission and naming, kill, a job master's verdict,
// the end of a job, requeue after preemption, events, state changes and the
// records the persister writes.
#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/accounting.h"
#include "api/convert.h"
#include "api/exec_size.h"
#include "api/job_spec.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "api/task_env.h"
#include "common/check.h"
#include "common/logging.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

ControlState::ControlState(ServerConfig config, std::unique_ptr<core::Scheduler> scheduler,
                           ExecutionBackend* backend, absl::Time now)
    : config_(std::move(config)), scheduler_(std::move(scheduler)), backend_(backend), started_(now) {}

ControlState::~ControlState() = default;

absl::StatusOr<PreparedJob> ControlState::PrepareSubmit(v1::JobSpec spec, absl::Time now,
                                                        std::vector<std::string> parse_problems) {
  absl::StatusOr<CheckedSpec> checked =
      CheckSubmission(std::move(spec), std::move(parse_problems), config_, scheduler_->options().queues.root);
  if (!checked.ok()) return checked.status();
  return PrepareChecked(*std::move(checked), now);
}

absl::StatusOr<PreparedJob> ControlState::PrepareChecked(CheckedSpec checked, absl::Time now) {
  std::string name = FreeName(checked.spec.name(), {});
  return PrepareNamed(std::move(checked), name, now, nullptr);
}

absl::StatusOr<PreparedJob> ControlState::PrepareNamed(CheckedSpec checked, const std::string& name, absl::Time now,
                                                       const ArrayPlace* place) {
  v1::JobSpec& spec = checked.spec;
  const std::string& defaulted = checked.defaulted;
  if (std::vector<std::string> unknown = gates_.UnknownDependencies(spec); !unknown.empty()) {
    return api::ProblemsStatus(unknown);
  }
  spec.set_name(name);
  // Only a job whose tasks talk to a master gets one (api::UsesJobMaster):
  // the others would pay its reservation and port for nothing.
  if (config_.jobmaster_enabled && api::UsesJobMaster(spec) && spec.job_master_address().empty()) {
    AddJobMasterRole(&spec, name,
                     {.vcores_milli = config_.jobmaster_vcores_milli,
                      .memory_mb = config_.jobmaster_memory_mb,
                      .binary = config_.trainyard_binary,
                      .server = server_address_.empty() ? config_.listen : server_address_});
  }
  api::ExecJob exec{.name = name,
                    .checkpoint_dir = api::JobCheckpointDir(config_.checkpoint_root, name, next_job_id_),  // its id below
                    .job_master = api::HasJobMaster(spec)};
  std::vector<std::string> problems = api::CheckExecSize(spec, exec, {.arg_max = config_.exec_arg_max});
  if (!problems.empty()) return api::ProblemsStatus(problems);
  PreparedJob out;
  v1::JobRecord& rec = out.rec;
  rec.set_id(next_job_id_++);
  rec.set_name(name);
  rec.set_submit_time_ms(ToMs(now));
  *rec.mutable_spec() = std::move(spec);
  const v1::JobSpec& kept = rec.spec();
  absl::StatusOr<core::JobRequest> req = api::ToJobRequest(rec);
  if (!req.ok()) return req.status();
  if (absl::Status st = core::ValidateJob(*req); !st.ok()) return absl::InvalidArgumentError(st.message());
  if (absl::Status st = counts_.CheckUser(kept.user(), now, !place ? 1 : place->first ? place->count : 0); !st.ok()) return st;
  out.request = *std::move(req);
  counts_.Prepared(kept.user());  // until AcceptCommitted counts it by its state
  jobs_[name] = nullptr;  // reserves the name until the record is durable
  rec.set_state(v1::JOB_QUEUED);
  rec.set_pending_reason("waiting for the scheduler");
  rec.set_held(kept.hold());
  gates_.ResolveDependencies(kept, &rec);
  if (place) {
    rec.set_array_job(place->array);
    rec.set_array_index(place->index);
    rec.set_array_throttle(place->throttle);
  }
  AddTaskRecords(kept, &rec);
  out.first_event = SubmittedEvent(rec, defaulted);
  return out;
}

absl::StatusOr<v1::SubmitResponse> ControlState::AcceptCommitted(PreparedJob& prepared, const absl::Status& st) {
  counts_.Answered(prepared.rec.spec().user());  // now counted by its state, if taken
  if (!st.ok()) {
    jobs_.erase(prepared.rec.name());
    gates_.DropArray(prepared.rec.array_job());  // its elements share the answer
    return absl::UnavailableError(absl::StrCat("the job was not accepted: the store cannot keep it: ",
                                               st.message()));
  }
  auto job = std::make_unique<JobRt>();
  job->rec = std::move(prepared.rec);
  const v1::JobRecord& rec = job->rec;
  LoadTaskState(*job);  // a new job: every task PENDING at attempt 0
  job->events = job->events.Append(ToView(prepared.first_event));
  const bool gated = GateBook::Gated(rec);
  absl::Status added = gated ? absl::OkStatus() : scheduler_->AddJob(prepared.request);
  if (gated) {
    KeepGated(*job);
  } else if (added.ok()) {
    job->in_scheduler = true;
  } else {
    job->rec.set_message(absl::StrCat("the scheduler refused the job: ", added.message()));
    SetJobState(*job, v1::JOB_FAILED, absl::FromUnixMillis(rec.submit_time_ms()));  // ends as it is accepted
  }
  ++stats_.submitted;
  v1::SubmitResponse resp;
  resp.set_job(rec.name());
  resp.set_job_id(rec.id());
  publisher_.JobChanged(rec.name());
  publisher_.QueuesChanged();
  counts_.Count(*job);
  jobs_[rec.name()] = std::move(job);
  wants_round_ = true;
  return resp;
}

void ControlState::AddEvent(JobRt& job, const std::string& kind, const std::string& text, absl::Time now) {
  v1::JobEventRecord ev;
  ev.set_job_id(job.rec.id());
  ev.set_time_ms(ToMs(now));
  ev.set_kind(kind);
  ev.set_text(text);
  job.events = job.events.Append(ToView(ev));
  persister_.batch().AppendEvent(std::move(ev));
  publisher_.JobChanged(job.rec.name());
  // Every job is scheduled and started; at thousands of jobs a second those
  // lines would cost more than the work. They stay in the job's events.
  bool routine = kind == "scheduled" || kind == "started";
  Log(routine ? LogLevel::kDebug : LogLevel::kInfo, "server", "job %s: %s", job.rec.name(), text);
}

void ControlState::Persist(const JobRt& job) {
  persister_.MarkJob(job.rec.name());
  // What the job did may show on the nodes its tasks are on (their free
  // resources, their task lists): those are checked at the next publication.
  publisher_.JobMoved(job.rec.name());
  publisher_.QueuesChanged();
}

void ControlState::SetJobState(JobRt& job, v1::JobState state, absl::Time now) {
  v1::JobState from = job.rec.state();
  if (from == state) return;
  TY_CHECK(api::IsLegalTransition(from, state), "job %s: %s -> %s is not a transition the server makes",
           job.rec.name().c_str(), api::JobStateName(from), api::JobStateName(state));
  job.rec.set_state(state);
  if (state == v1::JOB_RUNNING && job.rec.start_time_ms() == 0) {
    job.rec.set_start_time_ms(ToMs(now));
    deadlines_.Watch(job.rec);  // its time limit counts from here
  }
  if (api::IsTerminal(state)) {
    job.rec.set_end_time_ms(ToMs(now));
    gates_.Ended(job.rec.id(), state, job.rec.name());
    retention_.Finished(job.rec);
    WakeGates(job);
  }
  counts_.Count(job);
  Persist(job);
}

void ControlState::SetTaskState(JobRt& job, int task, v1::TaskState state, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(task);
  TY_CHECK(api::IsLegalTransition(t->state(), state), "task %s of job %s: %s -> %s is not a transition the server makes",
           api::TaskName(job.rec.name(), t->role(), t->index()).c_str(), job.rec.name().c_str(),
           api::TaskStateName(t->state()), api::TaskStateName(state));
  bool held = api::HoldsPlace(t->state()), holds = api::HoldsPlace(state);
  if (held && !holds) {
    ChargeHeld(job, task, now);
    t->set_held_since_ms(0);
  } else if (!held && holds) {
    t->set_held_since_ms(ToMs(now));
  }
  t->set_state(state);
}

void ControlState::ChargeHeld(JobRt& job, int task, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(task);
  if (t->held_since_ms() <= 0) return;
  api::AddUsage(t->allocation(), ToMs(now) - t->held_since_ms(), job.rec.mutable_usage());
  t->set_held_since_ms(ToMs(now));
}

absl::StatusOr<v1::JobState> ControlState::Kill(const std::string& name, const std::string& reason, absl::Time now) {
  JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  if (!api::IsTerminal(job->rec.state())) {
    EndJob(*job, v1::JOB_KILLED, reason.empty() ? "killed by the user" : reason, now);
  } else if (job->checkpoint.id() > 0) {
    // Ended (past its time limit) and saving its work: a kill stops it now.
    AddEvent(*job, "checkpoint", absl::StrCat("its tasks are stopped now: ", reason.empty() ? "killed by the user" : reason),
             now);
    EndCheckpointOrder(*job);
    KillTasks(*job, config_.kill_grace_ms, reason.empty() ? "killed by the user" : reason);
  }
  return job->rec.state();
}

void ControlState::EndJob(JobRt& job, v1::JobState state, const std::string& message, absl::Time now) {
  if (job.ending) return;
  job.ending = true;
  job.preempting = false;
  job.resizing = false;
  preempting_.erase(job.rec.name());
  job.rec.set_message(message);
  job.rec.set_pending_reason("");
  deadlines_.Unwatch(job.rec);
  SetJobState(job, state, now);
  AddEvent(job, "finished", absl::StrCat(api::JobStateName(state), ": ", message), now);
  // Tasks never placed are done at once; the others are stopped.
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    const v1::TaskRecord& t = job.rec.tasks(i);
    if (t.node().empty() && !api::IsTerminal(t.state())) SetTaskState(job, i, v1::TASK_KILLED, now);
  }
  // A job past its time limit gives way as a preemption victim does, its
  // work saved first; the other ends stop their tasks outright.
  if (state == v1::JOB_DEADLINE_EXCEEDED) {
    // A job with a master is ordered to checkpoint and given the time a
    // preemption victim gets; one without gets SIGTERM and the kill's grace.
    StopWithGrace(job, job.job_master.empty() ? config_.kill_grace_ms : config_.preemption_grace_ms, message, now);
  } else {
    EndCheckpointOrder(job);  // killed or failed meanwhile: stopped now
    KillTasks(job, config_.kill_grace_ms, message);
  }
  MaybeFinish(job, now);
  RoomFreed();
}

void ControlState::RoomFreed() {
  if (counts_.pending() > 0 || !partial_.empty() || !preempting_.empty()) wants_round_ = true;
}

void ControlState::MaybeFinish(JobRt& job, absl::Time now) {
  for (const auto& t : job.rec.tasks()) {
    // A task still waiting for room (minAvailable below count) runs nowhere.
    bool never_placed = t.node().empty() && t.state() == v1::TASK_PENDING;
    if (!api::IsTerminal(t.state()) && !never_placed) return;
  }
  EndCheckpointOrder(job);  // its tasks ended on their own meanwhile
  if (job.preempting) {
    EndPreemption(job, now);
    return;
  }
  if (job.ending && job.in_scheduler) {
    // Every task has ended, so the scheduler holds nothing of it: an error
    // here (it never knew the job) leaves nothing behind.
    absl::Status st = scheduler_->RemoveJob(job.rec.name());
    if (!st.ok()) Say(LogLevel::kDebug, "job %s: %s", job.rec.name(), std::string(st.message()));
    job.in_scheduler = false;
    RoomFreed();
  }
}

void ControlState::EndPreemption(JobRt& job, absl::Time now) {
  // Stopped for its node's drain or its agent's shutdown (StopForRequeue):
  // back in the queue, no budget charged.
  if (job.preempted_by.empty()) {
    Requeue(job, job.preempted_note, now);
    return;
  }
  // A task that ran is charged; one still waiting for room was not preempted.
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    const v1::TaskRecord& t = job.rec.tasks(i);
    const v1::ReplicaSpec* rs = ReplicaOf(job, i);
    if (t.node().empty() || !rs || MayRestart(job, i, v1::ATTEMPT_PREEMPTED)) continue;
    std::string message =
        absl::StrCat("task ", api::TaskName(job.rec.name(), t.role(), t.index()), " was ", job.preempted_note,
                     " (PREEMPTED; ", api::BudgetText(*rs, t.restarts_by_class(), v1::ATTEMPT_PREEMPTED), ")");
    // Its grace ran out without its agent confirming the stop: what its
    // tasks hold is given up now, as a requeue gives it up, so that the
    // preemptor is not kept waiting on the failed job.
    for (int k = 0; k < job.rec.tasks_size(); ++k) {
      v1::TaskRecord* held = job.rec.mutable_tasks(k);
      if (api::IsTerminal(held->state()) || held->node().empty()) continue;
      SendKill(held->node(), job.rec.name(), job.rec.id(), held->role(), held->index(), 0, message);
      if (job.in_scheduler) {
        absl::Status st = scheduler_->TaskFinished(job.rec.name(), held->role(), held->index());
        if (!st.ok()) Say(LogLevel::kDebug, "%s: %s", job.rec.name(), std::string(st.message()));
      }
      SetTaskState(job, k, v1::TASK_KILLED, now);
      held->set_end_time_ms(ToMs(now));
    }
    EndJob(job, v1::JOB_FAILED, message, now);
    Persist(job);
    return;
  }
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    v1::TaskRecord* t = job.rec.mutable_tasks(i);
    if (!t->node().empty()) api::SpendRestart(t->mutable_restarts_by_class(), v1::ATTEMPT_PREEMPTED);
  }
  Requeue(job, job.preempted_note, now);
  // The scheduler chooses a job that one more preemption would end last.
  if (job.in_scheduler && api::PreemptionWouldEnd(job.rec)) {
    absl::Status st = scheduler_->SetLastPreemption(job.rec.name(), true);
    if (!st.ok()) Say(LogLevel::kDebug, "job %s: %s", job.rec.name(), std::string(st.message()));
  }
}

void ControlState::Requeue(JobRt& job, const std::string& reason, absl::Time now) {
  ++stats_.requeues;
  job.queued_since = now;
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    v1::TaskRecord* t = job.rec.mutable_tasks(i);
    if (!api::IsTerminal(t->state()) && !t->node().empty()) {
      SendKill(t->node(), job.rec.name(), job.rec.id(), t->role(), t->index(), 0, reason);
    }
    // TRAINYARD_RESTART_COUNT counts earlier attempts: only a task that was
    // placed (launched) has one behind it; one still waiting for room has not.
    bool launched = !t->node().empty();
    publisher_.TouchNode(t->node());  // what it held there is freed below
    SetTaskState(job, i, v1::TASK_PENDING, now);  // charges what it held
    t->set_node("");
    t->clear_allocation();
    if (launched) t->set_attempt(t->attempt() + 1);
    job.task_rt[i].launch_base = t->attempt();
    // Told to leave a node (a drain, a GPU fault) before the requeue: that
    // order is over; its next placement starts afresh.
    job.task_rt[i].evicting = false;
  }
  if (job.in_scheduler) {
    // Pending already (a second loss in one event, a node lost again before
    // a round placed the job): the scheduler's state is the one wanted, so
    // this is logged, not fatal.
    absl::Status st = scheduler_->RequeueJob(job.rec.name());
    if (!st.ok()) Say(LogLevel::kWarning, "job %s: requeue: %s", job.rec.name(), std::string(st.message()));
  }
  job.preempting = false;
  job.resizing = false;
  preempting_.erase(job.rec.name());
  EndCheckpointOrder(job);
  job.job_master.clear();
  job.rec.set_pending_reason(reason);
  SetJobState(job, v1::JOB_QUEUED, now);
  AddEvent(job, "requeued", absl::StrCat("back in the queue: ", reason), now);
  Persist(job);
  wants_round_ = true;
}

absl::StatusOr<v1::DeleteJobResponse> ControlState::DeleteJob(const std::string& name, absl::Time now) {
  JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  if (!api::IsTerminal(job->rec.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", name, " is ", api::JobStateName(job->rec.state()),
                                                      "; kill it first (trainyard kill ", name, "), then delete it"));
  }
  for (const auto& t : job->rec.tasks()) {
    if (!api::IsTerminal(t.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", name, " is still stopping its tasks; delete it once they have stopped"));
    }
  }
  // The record stays in the store under its id, renamed to a name no
  // submission can take ('#' is not allowed in names), so the name is free.
  std::unique_ptr<JobRt> gone = std::move(jobs_[name]);
  jobs_[name] = nullptr;  // reserved until the rename is durable (ReleaseName)
  std::string kept = absl::StrCat(name, "#", gone->rec.id());
  AddEvent(*gone, "deleted", absl::StrCat("deleted; its record is kept as ", kept, " and the name ", name, " is free"),
           now);
  gone->rec.set_name(kept);
  gone->rec.set_deleted_time_ms(ToMs(now));
  publisher_.JobDeleted(name, api::AccountOf(gone->rec));
  persister_.MarkJob(kept);
  v1::DeleteJobResponse resp;
  resp.set_id(gone->rec.id());
  resp.set_kept_as(kept);
  retention_.HoldDeleted(kept, std::move(gone));
  publisher_.QueuesChanged();
  return resp;
}

void ControlState::ReleaseName(const std::string& name) {
  auto it = jobs_.find(name);
  if (it != jobs_.end() && it->second == nullptr) jobs_.erase(it);
}

void ControlState::ExpireFinished(absl::Time now) {
  // Never while a write is with the store: what this marks goes out in the
  // next write.
  if (!retention_.Due(now) || persister_.in_flight()) return;
  retention_.TurnTaken(now);
  constexpr int kPerTurn = 20;
  int budget = kPerTurn;
  std::vector<std::pair<int64_t, std::string>> later;  // still stopping its tasks
  // Jobs still stopping cost no budget, but a look at most 10,000 a turn.
  for (int looked = 0; budget > 0 && looked < 10000; ++looked) {
    std::optional<std::pair<int64_t, std::string>> due = retention_.NextExpired(now);
    if (!due) break;
    const JobRt* job = FindJob(due->second);
    // Deleted meanwhile, or a later job of the same name.
    if (!job || !api::IsTerminal(job->rec.state()) || EndOf(job->rec) != due->first) continue;
    absl::StatusOr<v1::DeleteJobResponse> gone = DeleteJob(due->second, now);
    if (!gone.ok()) {
      later.push_back(*std::move(due));
      continue;
    }
    retention_.Expired(gone->kept_as(), due->second);
    --budget;
  }
  for (auto& [end, name] : later) retention_.PutBack(end, std::move(name));
  // Records past the accounting retention leave the store. The ids stay
  // counted from where they were (kNextJobIdFloor), as a purged job may
  // have had the highest.
  std::vector<uint64_t> purges = retention_.TakePurges(now, budget);
  for (uint64_t id : purges) persister_.batch().PurgeJob(id);
  budget -= static_cast<int>(purges.size());
  if (!purges.empty()) persister_.batch().PutMeta(std::string(kNextJobIdFloor), absl::StrCat(next_job_id_));
  if (budget == 0) retention_.MoreDue(now);  // more waiting: the next round goes on
}

absl::Status ControlState::ReportOutcome(const v1::JobOutcomeRequest& req, absl::Time now) {
  JobRt* job = FindJob(req.job());
  if (!job) return absl::NotFoundError(absl::StrCat("job '", req.job(), "' does not exist"));
  if (req.state() != v1::JOB_SUCCEEDED && req.state() != v1::JOB_FAILED) {
    return absl::InvalidArgumentError("state: must be JOB_SUCCEEDED or JOB_FAILED");
  }
  bool master_task = FindTask(*job, std::string(api::kRoleJobMaster), 0) >= 0;
  if (master_task && !req.master_address().empty() && req.master_address() != job->job_master) {
    // A master cut off on a lost node, still running: its verdict is stale.
    return absl::FailedPreconditionError(absl::StrCat("job ", req.job(), ": the job master at ", req.master_address(),
                                                      " was replaced by the one at ", job->job_master,
                                                      "; its verdict is ignored"));
  }
  if (api::IsTerminal(job->rec.state()) || job->ending) return absl::OkStatus();
  std::string msg = req.reason().empty()
                        ? (req.state() == v1::JOB_SUCCEEDED ? "all workers completed" : "the job master reported failure")
                        : req.reason();
  EndJob(*job, req.state(), msg, now);
  return absl::OkStatus();
}

std::optional<Persister::Write> ControlState::TakeWrite() {
  // Schedules may have changes waiting (a few per write: etcd's limits).
  schedules_.Write(&persister_.batch());
  std::optional<Persister::Write> write = persister_.Take(
      [this](const std::string& name, WriteBatch* batch) {
        if (const JobRt* job = FindJob(name)) {
          batch->UpdateJob(job->rec);
        } else if (const JobRt* deleted = retention_.Deleted(name)) {
          batch->UpdateJob(deleted->rec);
        }
      },
      [this](const std::string& name, WriteBatch* batch) {
        const NodeRt* found = FindNode(name);
        if (!found) {
          batch->DeleteNode(name);  // removed (`trainyard node remove`)
          return;
        }
        batch->PutNode(NodeRecordOf(*found));
      });
  if (!write) return write;
  schedules_.BatchTaken();
  return write;
}

void ControlState::WriteDone(const Persister::Write& write, const absl::Status& st, bool stopping) {
  Persister::RawWrites failed = persister_.Done(write.seq, write.jobs, write.nodes, st, stopping);
  orders_.WriteDone(write.seq, st.ok());
  // A failed write's purges are asked again, and its schedules' records
  // written again as they are now (its job and node records are marked
  // again by the persister).
  for (uint64_t id : failed.purges) retention_.PurgeFailed(id);
  for (const std::string& key : failed.meta_keys) schedules_.Rewrite(key);
  // A deleted job is held only until its renamed record is in the store;
  // an expired one's name is free then.
  if (st.ok()) {
    for (const std::string& name : write.jobs) {
      if (std::optional<std::string> freed = retention_.Written(name)) ReleaseName(*freed);
    }
  }
}

}  // namespace trainyard::server
