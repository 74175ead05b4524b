// ControlState: nodes — liveness, a node lost (its tasks moved to another
// node through the scheduler core, or their jobs requeued or ended), a node
// back or registering with a new spec, and recovery from the store (jobs
// taken back into the scheduler, their running tasks adopted as their nodes
// return).
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/accounting.h"
#include "api/convert.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "common/logging.h"
#include "common/server_list.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

void ControlState::Recover(StoreSnapshot snap, std::vector<v1::JobRecord> finished, absl::Time now) {
  // The snapshot's records are moved into the control state, not copied
  // (a restart of a big cluster holds a hundred thousand tasks).
  started_ = now;
  schedules_.Recover(snap.meta);
  next_job_id_ = snap.max_job_id + 1;
  if (auto floor = snap.meta.find(kNextJobIdFloor); floor != snap.meta.end()) {
    uint64_t at_least = 0;
    if (absl::SimpleAtoi(floor->second, &at_least)) next_job_id_ = std::max(next_job_id_, at_least);
  }
  for (const v1::NodeRecord& n : snap.nodes) RecoverNode(n, now);
  for (v1::JobRecord& rec : snap.jobs) RecoverLiveJob(std::move(rec), now);
  // Finished jobs stay visible (describe, jobs -a) and keep their names taken:
  // a new job must not get the name of one the store already holds.
  const int64_t accounts_from = ToMs(now - absl::Hours(24) * config_.accounting_retention_days);
  for (v1::JobRecord& rec : finished) RecoverFinishedJob(std::move(rec), accounts_from, now);
  // An array's elements by index, as they were made.
  gates_.SortArrays([this](const std::string& name) {
    const JobRt* job = FindJob(name);
    return job ? job->rec.array_index() : INT32_MAX;  // not recovered: last
  });
  // Their views are published after the first rounds (PublishRecovered), so
  // a restart reaches its first launch as fast as before views existed.
  for (const auto& [name, job] : jobs_) {
    if (job) publisher_.Recovered(name);
  }
  wants_round_ = true;
}

void ControlState::RecoverNode(const v1::NodeRecord& n, absl::Time now) {
  auto node = std::make_unique<NodeRt>();
  node->info = n.info();
  node->state = v1::NODE_LOST;  // until its agent reconnects
  node->cordoned = n.cordoned();
  node->draining = n.draining();
  node->admin_reason = n.admin_reason();
  node->cordoned_gpus = n.cordoned_gpus();
  node->last_heartbeat = node->heard = now;
  AddNode(n.info().name(), std::move(node));
}

void ControlState::HoldFromNow(v1::JobRecord& rec, absl::Time now) {
  for (v1::TaskRecord& t : *rec.mutable_tasks()) {
    if (!api::HoldsPlace(t.state()) || t.held_since_ms() != 0) continue;
    t.set_held_since_ms(ToMs(now));
    persister_.MarkJob(rec.name());
  }
}

void ControlState::RecoverLiveJob(v1::JobRecord rec, absl::Time now) {
  for (v1::TaskRecord& t : *rec.mutable_tasks()) api::UpgradeRestartCounts(&t);
  HoldFromNow(rec, now);
  auto job = std::make_unique<JobRt>();
  job->rec = std::move(rec);
  job->events_loaded = false;
  if (!job->rec.array_job().empty()) gates_.AddElement(job->rec.array_job(), job->rec.name());
  if (GateBook::Gated(job->rec)) {
    // Held or waiting still: the first round decides (CheckGates), once
    // every job it may wait for is back.
    LoadTaskState(*job);
    gates_.Keep(job->rec);
    counts_.Count(*job);
    deadlines_.Watch(job->rec);  // one that ran before its requeue keeps its limit; none for one never started
    jobs_[job->rec.name()] = std::move(job);
    return;
  }
  if (!RecoverIntoScheduler(*job)) {
    jobs_[job->rec.name()] = nullptr;  // left in the store; its name stays taken
    return;
  }
  counts_.Count(*job);
  deadlines_.Watch(job->rec);  // from its recorded start: the limit survives the restart
  // An elastic job's size counts as new: it grows no sooner than
  // elasticGrowAfterMs after the restart, once its nodes are back.
  job->sized_at = now;
  jobs_[job->rec.name()] = std::move(job);
}

void ControlState::RecoverFinishedJob(v1::JobRecord rec, int64_t accounts_from, absl::Time now) {
  next_job_id_ = std::max(next_job_id_, rec.id() + 1);
  if (api::IsTerminal(rec.state())) {
    // A deleted record's name is NAME#ID: the name it ended under is before the '#'.
    gates_.Ended(rec.id(), rec.state(), api::EndedName(rec.name()));
  }
  if (rec.deleted_time_ms() != 0) {  // its name was freed; the store keeps it, and accounting
    if (rec.end_time_ms() >= accounts_from) publisher_.Unbooked(api::AccountOf(rec));
    retention_.Stored(rec);  // purged past the retention
    return;
  }
  auto job = std::make_unique<JobRt>();
  job->events_loaded = false;
  job->rec = std::move(rec);
  if (!job->rec.array_job().empty()) gates_.AddElement(job->rec.array_job(), job->rec.name());
  if (api::IsTerminal(job->rec.state())) retention_.Finished(job->rec);
  // Ended while its tasks were being stopped: they hold their resources
  // until their agents confirm the stop (or no longer have them).
  bool stopping = std::any_of(job->rec.tasks().begin(), job->rec.tasks().end(), [](const v1::TaskRecord& t) {
    return !t.node().empty() && !api::IsTerminal(t.state());
  });
  if (stopping) {
    HoldFromNow(job->rec, now);
    job->ending = true;
    RecoverIntoScheduler(*job);
  } else {
    LoadTaskState(*job);
  }
  jobs_[job->rec.name()] = std::move(job);
}

bool ControlState::RecoverIntoScheduler(JobRt& job) {
  const v1::JobRecord& rec = job.rec;
  LoadTaskState(job);
  for (const v1::TaskRecord& t : rec.tasks()) {
    if (!t.node().empty()) IndexTask(job, t.node());
  }
  absl::StatusOr<core::JobRequest> req = api::ToJobRequest(rec);
  if (!req.ok()) {
    Say(LogLevel::kWarning, "job %s cannot be recovered: %s", rec.name(), std::string(req.status().message()));
    return false;
  }
  bool placed = std::any_of(rec.tasks().begin(), rec.tasks().end(),
                            [](const v1::TaskRecord& t) { return !t.node().empty(); });
  job.job_master = JobMasterAddress(job, nodes_);  // for tasks launched again after the restart
  if (!scheduler_->AddJob(*req).ok()) return true;
  job.in_scheduler = true;
  if (placed && rec.state() != v1::JOB_QUEUED) {
    // Its tasks are adopted as their nodes come back (AdoptRecoveredTasks).
    absl::Status st = scheduler_->MarkRunning(rec.name(), absl::FromUnixMillis(rec.start_time_ms()));
    if (!st.ok()) Say(LogLevel::kError, "job %s: %s", rec.name(), std::string(st.message()));
    job.recovered_placed = true;
    bool waiting = std::any_of(rec.tasks().begin(), rec.tasks().end(), [](const v1::TaskRecord& t) {
      return t.node().empty() && t.state() == v1::TASK_PENDING;
    });
    if (waiting) partial_.insert(rec.name());  // placed with a smaller gang; the rest still wait
  }
  return true;
}

void ControlState::IndexTask(const JobRt& job, const std::string& node) { node_jobs_[node].insert(job.rec.name()); }

std::vector<std::pair<JobRt*, int>> ControlState::TasksOn(const std::string& node) {
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

absl::Status ControlState::NodeUp(NodeRt& node) {
  node.state = v1::NODE_READY;
  if (!node.in_scheduler) {
    absl::StatusOr<core::NodeSpec> spec = api::ToNodeSpec(node.info);
    if (!spec.ok()) return spec.status();
    if (absl::Status st = scheduler_->AddNode(*spec); !st.ok()) return st;
    node.in_scheduler = true;
    PushPortsInUse(node);
    node.busy_gpus = 0;  // none excluded in the core yet: busy and faulty GPUs go out now
    SyncExcludedGpus(node);
    AdoptRecoveredTasks(node);
  }
  UpdateSchedulable(node);  // a cordoned, drained or degraded node stays out
  persister_.MarkNode(node.info.name());
  publisher_.NodesChanged();
  wants_round_ = true;
  return absl::OkStatus();
}

namespace {
// What the scheduler knows of a node: a change in any of it needs the new
// spec in the scheduler.
bool SameSchedulingSpec(const v1::NodeInfo& a, const v1::NodeInfo& b) {
  return a.capacity().SerializeAsString() == b.capacity().SerializeAsString() &&
         a.topology().SerializeAsString() == b.topology().SerializeAsString() && a.rack() == b.rack() &&
         std::map<std::string, std::string>(a.labels().begin(), a.labels().end()) ==
             std::map<std::string, std::string>(b.labels().begin(), b.labels().end());
}
}  // namespace

absl::Status ControlState::RefreshNodeSpec(NodeRt& node, const v1::NodeInfo& old_info) {
  if (SameSchedulingSpec(node.info, old_info)) return absl::OkStatus();
  const std::string& name = node.info.name();
  Say(LogLevel::kInfo, "node %s registered with a new spec (capacity, ports, topology or labels); "
      "the scheduler takes it", name);
  // Its tasks leave the old node and are adopted on the new one with their
  // allocations; one that no longer fits there is ended as its node lost.
  std::vector<std::pair<JobRt*, int>> live = TasksOn(name);
  for (auto [job, i] : live) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (job->in_scheduler) {
      absl::Status st = scheduler_->TaskFinished(job->rec.name(), t.role(), t.index());
      if (!st.ok()) Say(LogLevel::kDebug, "%s: %s", job->rec.name(), std::string(st.message()));
    }
  }
  std::vector<std::string> requeued;
  if (absl::Status st = scheduler_->RemoveNode(name, &requeued); !st.ok()) return st;
  node.in_scheduler = false;
  absl::StatusOr<core::NodeSpec> spec = api::ToNodeSpec(node.info);
  if (!spec.ok()) return spec.status();
  if (absl::Status st = scheduler_->AddNode(*spec); !st.ok()) return st;
  node.in_scheduler = true;
  node.busy_gpus = 0;
  PushPortsInUse(node);
  for (auto [job, i] : live) {
    const v1::TaskRecord* t = &job->rec.tasks(i);
    if (!job->in_scheduler) continue;
    absl::Status st = scheduler_->AdoptTask(job->rec.name(), t->role(), t->index(), name, api::ToCore(t->allocation()));
    if (st.ok()) continue;
    std::string why = absl::StrCat("its allocation no longer fits node ", name, "'s new spec: ", st.message());
    Say(LogLevel::kWarning, "%s: %s", api::TaskName(job->rec.name(), t->role(), t->index()), why);
    SendKill(name, job->rec.name(), job->rec.id(), t->role(), t->index(), config_.kill_grace_ms, why);
    // TaskEnded's own release finds nothing left to free (logged at debug).
    EndLostTask(*job, i, why, node.registered);
  }
  return absl::OkStatus();
}

void ControlState::ExcuseStall(absl::Duration gap) {
  nodes_.ExcuseStall(gap);
  started_ += gap;
}

void ControlState::ExcuseOverload(absl::Duration gap, absl::Time now) {
  nodes_.ExcuseOverload(gap, now, absl::Milliseconds(config_.node_timeout_ms), kOverloadSilenceFactor);
}

void ControlState::CheckNodes(absl::Time now) {
  // Rounds run on every event (thousands a second under load); liveness
  // needs checking only at the tick's pace, not on each of them.
  if (now - last_liveness_check_ < absl::Milliseconds(100)) return;
  last_liveness_check_ = now;
  absl::Duration timeout = absl::Milliseconds(config_.node_timeout_ms);
  for (NodeRt* node : nodes_.SilentPast(now, timeout)) NodeLost(*node, now);
  // Tasks recovered from the store whose node never came back. An agent
  // whose server went silent (a leader paused or cut off) notices only when
  // its keepalive ping goes unanswered: it gets that long on top.
  if (now - started_ > timeout + absl::Milliseconds(kServerListKeepaliveMs + kServerListKeepaliveTimeoutMs)) {
    for (auto& [name, node] : nodes_) {
      if (node->state == v1::NODE_LOST && !node->in_scheduler && node->registered == absl::Time()) {
        node->registered = now;  // handle once
        NodeLost(*node, now);
      }
    }
  }
}

void ControlState::NodeLost(NodeRt& node, absl::Time now) {
  const std::string name = node.info.name();
  node.state = v1::NODE_LOST;
  Say(LogLevel::kWarning, "node %s lost: no heartbeat for %d ms", name, config_.node_timeout_ms);
  std::vector<std::pair<JobRt*, int>> moved;
  for (auto [job, i] : TasksOn(name)) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (job->in_scheduler) {
      absl::Status st = scheduler_->TaskFinished(job->rec.name(), t.role(), t.index());
      if (!st.ok()) Say(LogLevel::kDebug, "%s: %s", job->rec.name(), std::string(st.message()));
    }
    moved.emplace_back(job, i);
  }
  if (node.in_scheduler) {
    std::vector<std::string> requeued;
    absl::Status st = scheduler_->RemoveNode(name, &requeued);
    if (!st.ok()) Say(LogLevel::kWarning, "node %s: %s", name, std::string(st.message()));
    node.in_scheduler = false;
  }
  for (auto [job, i] : moved) {
    v1::TaskRecord* t = job->rec.mutable_tasks(i);
    // An earlier task of the same job may have taken this one along: its
    // job requeued (every task back to PENDING, off the node) or finished.
    // It has then left the node already; handling it again requeued the
    // job twice (issue 30: a paused node aborted the server).
    if (t->node() != name || api::IsTerminal(t->state())) continue;
    std::string tname = api::TaskName(job->rec.name(), t->role(), t->index());
    const v1::ReplicaSpec* rs = ReplicaOf(*job, i);
    if (job->ending || job->preempting) {
      SetTaskState(*job, i, v1::TASK_KILLED, now);
      MaybeFinish(*job, now);
    } else if (!rs || (!MayRestart(*job, i, v1::ATTEMPT_NODE_LOST) &&
                       (!job->task_rt[i].evicting || rs->restart_policy() == v1::RESTART_NEVER))) {
      SetTaskState(*job, i, v1::TASK_FAILED, now);
      t->mutable_exit()->set_message(absl::StrCat("lost with node ", name));
      std::string budget =
          RecordAttempt(*job, i, {.attempt = t->attempt(), .attempt_class = v1::ATTEMPT_NODE_LOST}, now, &stats_);
      EndJob(*job, v1::JOB_FAILED,
             absl::StrCat("task ", tname, " was lost with node ", name, " (NODE_LOST; ", budget, ")"), now);
    } else if (!ReplaceTask(*job, i,
                            MoveWhy{absl::StrCat("was lost with node ", name), !job->task_rt[i].evicting,
                                    job->task_rt[i].evicting ? v1::ATTEMPT_PREEMPTED : v1::ATTEMPT_NODE_LOST},
                            now)) {
      RecordAttempt(*job, i,
                    {.attempt = t->attempt(), .attempt_class = v1::ATTEMPT_NODE_LOST, .restarted = true,
                     .charge = false},
                    now, &stats_);
      Requeue(*job, absl::StrCat("task ", tname, " was lost with node ", name, " and no other node can take it now"),
              now);
    }
    Persist(*job);
  }
  persister_.MarkNode(name);
  publisher_.NodesChanged();
  wants_round_ = true;
}

bool ControlState::ReplaceTask(JobRt& job, int i, const MoveWhy& why, absl::Time now) {
  job.task_rt[i].evicting = false;
  if (!job.in_scheduler) return false;
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  // The core places it: queue limits, placement order, reservations,
  // nodeName and selectors all apply as they do to a whole gang.
  absl::StatusOr<core::TaskAssignment> placed = scheduler_->PlaceTask(job.rec.name(), t->role(), t->index());
  if (!placed.ok()) {
    Say(LogLevel::kInfo, "%s cannot move now: %s", api::TaskName(job.rec.name(), t->role(), t->index()),
        std::string(placed.status().message()));
    return false;
  }
  std::string budget = RecordAttempt(
      job, i, {.attempt = t->attempt(), .attempt_class = why.attempt_class, .restarted = true, .charge = why.charge},
      now, &stats_);
  std::string old = t->node();
  ChargeHeld(job, i, now);  // what it held on the node it leaves
  t->set_node(placed->node);
  t->clear_limits();  // its new node reports its own
  IndexTask(job, placed->node);
  *t->mutable_allocation() = api::ToProto(placed->allocation);
  SetTaskState(job, i, v1::TASK_LAUNCHING, now);
  t->set_attempt(t->attempt() + 1);
  // An uncharged move (a drain, an eviction) is no restart.
  if (why.charge) {
    t->set_restart_count(t->restart_count() + 1);
    if (why.attempt_class == v1::ATTEMPT_NODE_LOST) ++stats_.restarts_node_lost;
  }
  // A moved job master has a new address: the others learn it from the
  // "jobmaster" file PushFiles rewrites below.
  if (api::IsJobMasterRole(t->role())) job.job_master = JobMasterAddress(job, nodes_);
  AddEvent(job, "task_moved", absl::StrCat(api::TaskName(job.rec.name(), t->role(), t->index()), " ", why.text,
                                           "; restarted on ", placed->node, " (attempt ", t->attempt(),
                                           why.charge ? absl::StrCat("); ", budget)
                                                      : ", not counted as a restart)"),
           now);
  LaunchTask(job, i);
  PushFiles(job, i);  // the others' hosts files now name the new node
  return true;
}

void ControlState::AdoptRecoveredTasks(NodeRt& node) {
  for (auto [job, i] : TasksOn(node.info.name())) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (!job->recovered_placed || !job->in_scheduler || api::IsTerminal(t.state())) continue;
    absl::Status st =
        scheduler_->AdoptTask(job->rec.name(), t.role(), t.index(), node.info.name(), api::ToCore(t.allocation()));
    if (st.ok()) continue;
    // The node came back with other hardware (fewer GPUs, less memory) than
    // the task was given: it holds nothing there, so it must not stay live
    // there either (its GPUs could be given again). Stopped and ended as
    // lost, as RefreshNodeSpec does for a node that changed while known.
    std::string why = absl::StrCat("its allocation no longer fits node ", node.info.name(), " as it came back: ",
                                   st.message());
    Say(LogLevel::kWarning, "%s: %s", api::TaskName(job->rec.name(), t.role(), t.index()), why);
    SendKill(node.info.name(), job->rec.name(), job->rec.id(), t.role(), t.index(), config_.kill_grace_ms, why);
    EndLostTask(*job, i, why, node.registered);
  }
}

}  // namespace trainyard::server
