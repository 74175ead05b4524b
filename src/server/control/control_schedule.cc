// ControlState: scheduling rounds — the scheduler core's decisions applied
// (launch orders for placements, kill orders with a grace period for
// preemptions), pending reasons, and each launch's environment and files.
#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "api/convert.h"
#include "api/job_spec.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "api/task_env.h"
#include "common/logging.h"
#include "core/policy/pending_reason.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

void ControlState::RunRound(absl::Time now) {
  CheckNodes(now);
  CheckDeadlines(now);
  if (!checkpointing_.empty()) CheckCheckpointDeadlines(now);
  ExpireFinished(now);
  // Victims whose grace ran out without their agent confirming the stop.
  std::vector<JobRt*> overdue;
  for (const std::string& name : preempting_) {
    JobRt* job = FindJob(name);
    if (job && job->preempting &&
        now > job->preempt_deadline + absl::Milliseconds(config_.kill_grace_ms) + absl::Seconds(5)) {
      overdue.push_back(job);
    }
  }
  for (JobRt* job : overdue) EndPreemption(*job, now);
  if (gates_.RecheckDue()) CheckGates(now);
  core::Decisions d = scheduler_->Schedule(now);
  ++stats_.rounds;
  for (const core::Preemption& p : d.preemptions) ApplyPreemption(p, now);
  for (const core::JobPlacement& p : d.placements) ApplyPlacement(p, now);
  PlaceWaitingTasks(now);
  for (const core::PendingReason& r : d.pending) {
    JobRt* job = FindJob(r.job_id);
    if (job && job->rec.state() == v1::JOB_QUEUED) SetPendingReason(*job, r.reason, now);
  }
}

void ControlState::CheckDeadlines(absl::Time now) {
  for (const std::string& name : deadlines_.TakeDue(now)) {
    JobRt* job = FindJob(name);
    if (!job || job->ending || api::IsTerminal(job->rec.state())) continue;
    EndJob(*job, v1::JOB_DEADLINE_EXCEEDED, DeadlineWatch::Why(job->rec), now);
  }
}

void ControlState::SetPendingReason(JobRt& job, const std::string& reason, absl::Time now) {
  bool never = absl::StartsWith(reason, core::kUnschedulablePrefix);
  if (never && !job.unschedulable) AddEvent(job, "unschedulable", reason, now);
  job.unschedulable = never;
  std::string text = job.preempted_note.empty() ? reason : absl::StrCat(job.preempted_note, "; waiting: ", reason);
  if (job.rec.pending_reason() == text) return;
  job.rec.set_pending_reason(std::move(text));
  Persist(job);
}

void ControlState::ApplyPlacement(const core::JobPlacement& p, absl::Time now) {
  JobRt* job = FindJob(p.job_id);
  if (!job) return;
  std::map<std::string, int> per_node;
  // Tasks by (role, index), once: a lookup per assignment was O(tasks) each.
  std::map<std::pair<std::string_view, int>, int> task_at;
  for (int i = 0; i < job->rec.tasks_size(); ++i) {
    task_at.emplace(std::pair<std::string_view, int>(job->rec.tasks(i).role(), job->rec.tasks(i).index()), i);
  }
  for (const core::TaskAssignment& a : p.tasks) {
    auto found = task_at.find(std::pair(std::string_view(a.role), a.index));
    int i = found == task_at.end() ? -1 : found->second;
    if (i < 0) continue;
    v1::TaskRecord* t = job->rec.mutable_tasks(i);
    t->set_node(a.node);
    t->clear_limits();  // its new node reports its own
    IndexTask(*job, a.node);
    *t->mutable_allocation() = api::ToProto(a.allocation);
    SetTaskState(*job, i, v1::TASK_LAUNCHING, now);
    t->clear_exit();
    per_node[a.node]++;
    ++stats_.placements;
  }
  absl::Time queued = job->queued_since == absl::InfinitePast() ? absl::FromUnixMillis(job->rec.submit_time_ms())
                                                                 : job->queued_since;
  stats_.pending_seconds.Observe(std::max(0.0, absl::ToDoubleSeconds(now - queued)));
  std::vector<std::string> where;
  for (const auto& [node, n] : per_node) where.push_back(absl::StrCat(node, " (", n, n == 1 ? " task)" : " tasks)"));
  job->rec.set_pending_reason("");
  job->rec.set_message("");
  job->preempted_note.clear();
  job->unschedulable = false;
  SetJobState(*job, v1::JOB_SCHEDULED, now);
  AddEvent(*job, "scheduled", absl::StrCat("scheduled on ", absl::StrJoin(where, ", ")), now);
  job->job_master = JobMasterAddress(*job, nodes_);
  if (api::IsElastic(job->rec.spec())) NewMembership(*job, now);
  EnvContext ctx = EnvContextFor(*job, nodes_, config_.checkpoint_root);  // once for all the job's launches below
  for (int i = 0; i < job->rec.tasks_size(); ++i) {
    if (job->rec.tasks(i).state() == v1::TASK_LAUNCHING) LaunchTask(*job, i, &ctx);
  }
  if (static_cast<int>(p.tasks.size()) < job->rec.tasks_size()) {
    partial_.insert(job->rec.name());
    last_partial_try_ = absl::InfinitePast();  // say at once why the rest waits
  }
  Persist(*job);
}

namespace {

// "job j task worker-3: needs ..." -> "needs ...".
std::string WithoutTaskName(const absl::Status& st, const std::string& job, const v1::TaskRecord& t) {
  std::string prefix = absl::StrCat("job ", job, " task ", t.role(), "-", t.index(), ": ");
  std::string text(st.message());
  return absl::StartsWith(text, prefix) ? text.substr(prefix.size()) : text;
}
}  // namespace

void ControlState::PlaceWaitingTasks(absl::Time now) {
  if (partial_.empty() || now - last_partial_try_ < absl::Milliseconds(100)) return;
  last_partial_try_ = now;
  for (auto it = partial_.begin(); it != partial_.end();) {
    JobRt* job = FindJob(*it);
    if (!job || job->ending || job->preempting || !job->in_scheduler || job->rec.state() == v1::JOB_QUEUED) {
      it = partial_.erase(it);
      continue;
    }
    if (api::IsElastic(job->rec.spec())) {
      // It grows as a whole, never a task at a time (control_elastic.cc).
      std::string reason = GrowElastic(*job, now);
      if (job->preempting) {
        it = partial_.erase(it);
        continue;
      }
      if (job->rec.pending_reason() != reason) {
        job->rec.set_pending_reason(reason);
        Persist(*job);
      }
      ++it;
      continue;
    }
    std::vector<std::string> waits;
    std::set<std::string> blocked;  // roles whose next task found no room
    int placed_now = 0;
    for (int i = 0; i < job->rec.tasks_size(); ++i) {
      const v1::TaskRecord& t = job->rec.tasks(i);
      if (!Waiting(t) || blocked.count(t.role())) continue;
      absl::Status st = PlaceWaitingTask(*job, i, now);
      if (st.ok()) {
        ++placed_now;
        continue;
      }
      blocked.insert(t.role());
      int count = 0, left = 0;
      for (const v1::TaskRecord& o : job->rec.tasks()) {
        if (o.role() != t.role()) continue;
        ++count;
        left += Waiting(o) ? 1 : 0;
      }
      waits.push_back(absl::StrCat(count - left, " of ", count, " ", t.role(), " tasks placed; ", left,
                                   " wait for room: ", WithoutTaskName(st, job->rec.name(), t)));
    }
    if (placed_now > 0) PushFiles(*job, -1);  // the others' hosts files name the new tasks
    std::string reason = absl::StrJoin(waits, "; ");
    if (job->rec.pending_reason() != reason) {
      job->rec.set_pending_reason(reason);
      Persist(*job);
    }
    it = waits.empty() ? partial_.erase(it) : std::next(it);
  }
}

absl::Status ControlState::PlaceWaitingTask(JobRt& job, int i, absl::Time now) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  absl::StatusOr<core::TaskAssignment> placed = scheduler_->PlaceTask(job.rec.name(), t->role(), t->index());
  if (!placed.ok()) return placed.status();
  t->set_node(placed->node);
  t->clear_limits();  // its new node reports its own
  IndexTask(job, placed->node);
  *t->mutable_allocation() = api::ToProto(placed->allocation);
  SetTaskState(job, i, v1::TASK_LAUNCHING, now);
  ++stats_.placements;
  AddEvent(job, "scheduled", absl::StrCat(api::TaskName(job.rec.name(), t->role(), t->index()),
                                          " placed on ", placed->node, " as room appeared"), now);
  LaunchTask(job, i);
  return absl::OkStatus();
}

void ControlState::ApplyPreemption(const core::Preemption& p, absl::Time now) {
  JobRt* job = FindJob(p.victim_job_id);
  if (!job || job->preempting || job->ending) return;
  job->preempting = true;
  ++stats_.preemptions;
  preempting_.insert(job->rec.name());
  job->preempted_by = p.for_job_id;
  job->preempted_note = PreemptionNote(p, now);
  job->preempt_deadline = p.grace_deadline;
  AddEvent(*job, "preempted", absl::StrCat(job->preempted_note, "; ", absl::ToInt64Seconds(p.grace_deadline - now),
                                           " s to checkpoint before it is stopped"), now);
  int grace = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(p.grace_deadline - now)));
  StopWithGrace(*job, grace, absl::StrCat("preempted by ", p.for_job_id), now);
  MaybeFinish(*job, now);
}

std::string ControlState::PreemptionNote(const core::Preemption& p, absl::Time now) const {
  std::string by = absl::StrCat("job ", p.for_job_id);
  if (const JobRt* winner = FindJob(p.for_job_id)) {
    const JobRt* victim = FindJob(p.victim_job_id);
    v1::PriorityClass prio = winner->rec.spec().priority();
    bool by_priority = victim == nullptr || prio != victim->rec.spec().priority();
    absl::StrAppend(&by, by_priority ? absl::StrCat(" (priority ", api::PriorityName(prio), ")")
                                     : absl::StrCat(" (queue ", winner->rec.spec().queue(), " taking back its share)"));
  }
  return absl::StrCat("preempted by ", by, " at ", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()));
}

void ControlState::SendKill(const std::string& node, const std::string& job, uint64_t job_id, const std::string& role,
                            int index, int grace_ms, const std::string& reason) {
  const NodeRt* n = FindNode(node);
  if (!n || !n->connected()) return;
  v1::KillTask k;
  k.set_job(job);
  k.set_job_id(job_id);
  k.set_role(role);
  k.set_index(index);
  k.set_grace_ms(grace_ms);
  k.set_reason(reason);
  orders_.Kill(node, k);
}

void ControlState::KillTasks(JobRt& job, int grace_ms, const std::string& reason) {
  for (const v1::TaskRecord& t : job.rec.tasks()) {
    if (api::IsTerminal(t.state()) || t.node().empty()) continue;
    SendKill(t.node(), job.rec.name(), job.rec.id(), t.role(), t.index(), grace_ms, reason);
  }
}

void ControlState::StopWithGrace(JobRt& job, int grace_ms, const std::string& reason, absl::Time now) {
  // A job with a master is ordered to checkpoint (the master passes the
  // order to its workers, docs/jobmaster.md "Checkpoints"); its tasks are
  // stopped when the master says they saved, or at the deadline. A job
  // without one gets SIGTERM now and its grace.
  if (job.job_master.empty() || grace_ms <= 0) {
    KillTasks(job, grace_ms, reason);
    return;
  }
  if (job.checkpoint.id() > 0) {
    // Already saving (a preemption, then its time limit): the open order
    // stands, and its deadline; the stop gets the newer reason.
    job.stop_reason = reason;
    return;
  }
  // Ids count up across server restarts too (a master ignores an id it has
  // seen): never below the clock's milliseconds.
  job.orders = std::max(job.orders + 1, absl::ToUnixMillis(now));
  job.checkpoint.set_id(job.orders);
  job.checkpoint.set_deadline_unix_ms(absl::ToUnixMillis(now + absl::Milliseconds(grace_ms)));
  job.checkpoint.set_reason(reason);
  job.stop_reason = reason;
  checkpointing_.insert(job.rec.name());
  // The master task hears of it now; a master in the submitting client
  // (its address the client's to choose) at its next report only.
  if (job.rec.spec().job_master_address().empty()) {
    backend_->OrderCheckpoint(job.job_master, job.rec.id(), job.rec.name(), job.checkpoint);
  }
  AddEvent(job, "checkpoint", absl::StrCat("its job master is told to have the workers checkpoint within ",
                                           grace_ms / 1000.0, " s; the tasks are stopped once they saved"),
           now);
  Persist(job);
}

void ControlState::EndCheckpointOrder(JobRt& job) {
  if (job.checkpoint.id() == 0) return;
  job.checkpoint.Clear();
  checkpointing_.erase(job.rec.name());
  Persist(job);
}

void ControlState::CheckCheckpointDeadlines(absl::Time now) {
  std::vector<JobRt*> due;
  std::vector<std::string> gone;  // deleted meanwhile
  for (const std::string& name : checkpointing_) {
    JobRt* job = FindJob(name);
    if (!job || job->checkpoint.id() == 0) {
      gone.push_back(name);
    } else if (absl::FromUnixMillis(job->checkpoint.deadline_unix_ms()) <= now) {
      due.push_back(job);
    }
  }
  for (const std::string& name : gone) checkpointing_.erase(name);
  for (JobRt* job : due) {
    AddEvent(*job, "checkpoint", "its workers did not report a checkpoint by the deadline; its tasks are stopped",
             now);
    EndCheckpointOrder(*job);
    KillTasks(*job, config_.kill_grace_ms, job->stop_reason);
    // A victim's room is taken back only once this stop had its grace.
    if (job->preempting) job->preempt_deadline = now;
  }
}

absl::Status ControlState::CheckpointReported(const v1::CheckpointReport& req, absl::Time now) {
  JobRt* job = FindJob(req.job());
  if (!job) return absl::NotFoundError(absl::StrCat("job '", req.job(), "' does not exist"));
  if (absl::Status from = FromCurrentMaster(*job, req.master_address()); !from.ok()) return from;
  if (job->checkpoint.id() == 0 || req.order_id() != job->checkpoint.id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "order_id: ", req.order_id(), " is not job ", req.job(), "'s open order to checkpoint (",
        job->checkpoint.id() == 0 ? "it has none" : absl::StrCat("that is ", job->checkpoint.id()),
        "); the report is ignored"));
  }
  if (req.step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step: ", req.step(), " is negative; give the step saved"));
  }
  int grace_ms = config_.kill_grace_ms;
  if (req.saved()) {
    job->rec.set_resume_step(req.step());
    AddEvent(*job, "checkpointed", absl::StrCat(req.workers(), req.workers() == 1 ? " worker" : " workers",
                                                " saved step ", req.step(), "; its tasks are stopped and resume there"),
             now);
  } else {
    // No worker checkpoints: the tasks get what is left of the grace, as
    // they would have without a master.
    absl::Time deadline = absl::FromUnixMillis(job->checkpoint.deadline_unix_ms());
    grace_ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - now)));
    AddEvent(*job, "checkpoint", absl::StrCat("no worker of the job checkpoints; its tasks are stopped with ",
                                              grace_ms / 1000.0, " s of grace"),
             now);
  }
  EndCheckpointOrder(*job);
  KillTasks(*job, grace_ms, job->stop_reason);
  return absl::OkStatus();
}

void ControlState::PushFiles(JobRt& job, int except) {
  std::optional<EnvContext> ctx;
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    const v1::TaskRecord& t = job.rec.tasks(i);
    if (i == except || t.node().empty() || api::IsTerminal(t.state())) continue;
    if (!ctx) ctx = EnvContextFor(job, nodes_, config_.checkpoint_root);
    if (!SendFiles(job, i, *ctx)) stale_files_[t.node()].insert(job.rec.name());  // sent when the node is back
  }
}

void ControlState::PushFilesTo(JobRt& job, const std::string& node) {
  std::optional<EnvContext> ctx;
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    const v1::TaskRecord& t = job.rec.tasks(i);
    if (t.node() != node || api::IsTerminal(t.state()) || t.state() == v1::TASK_LAUNCHING) continue;
    if (!ctx) ctx = EnvContextFor(job, nodes_, config_.checkpoint_root);
    SendFiles(job, i, *ctx);
  }
}

bool ControlState::SendFiles(JobRt& job, int i, EnvContext& ctx) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  const NodeRt* n = FindNode(t.node());
  if (!n || !n->connected()) return false;
  DeferredOrder order;
  order.kind = DeferredOrder::kFiles;
  order.node = t.node();
  order.files = TaskFilesFor(job, i, ctx);
  orders_.Order(std::move(order));
  return true;
}

void ControlState::LaunchTask(JobRt& job, int i, EnvContext* ctx) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  const NodeRt* node = FindNode(t.node());
  if (!node) return;
  const v1::ReplicaSpec* rs = ReplicaOf(job, i);
  if (!rs) return;
  std::optional<EnvContext> own;
  if (!ctx) ctx = &own.emplace(EnvContextFor(job, nodes_, config_.checkpoint_root));
  v1::TaskSpec spec = TaskSpecFor(job, i, *rs, EnvFor(job, i, *ctx),
                                  {.kill_grace_ms = config_.kill_grace_ms,
                                   .server_address = server_address_.empty() ? config_.listen : server_address_});
  TaskRt& rt = job.task_rt[i];
  rt.launch_base = t.attempt();
  RecordLaunch(*job.rec.mutable_tasks(i));
  Persist(job);
  rt.missing_beats = 0;
  rt.acked = false;
  DeferredOrder order;
  order.kind = DeferredOrder::kLaunch;
  order.node = t.node();
  order.job_id = job.rec.id();
  order.job = job.rec.name();
  order.task = i;
  order.spec = std::move(spec);
  orders_.Order(std::move(order));
}

}  // namespace trainyard::server
