// ControlState: node administration — cordon, uncordon, drain, remove — and
// the server's own reasons to keep tasks off a node (launches its agent
// refused for a reason of the node, a data dir short of disk). A node takes
// new tasks only while connected, READY, its agent not stopping, not cordoned
// or drained and not degraded; UpdateSchedulable is the one place that tells the core so.
//
// These are admin verbs: once principals exist (docs/control-plane.md), the
// shell checks that the caller is a cluster admin before calling them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/convert.h"
#include "api/gpu_faults.h"
#include "api/roles.h"
#include "common/logging.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

namespace {
absl::Status UnknownNode(const std::string& name) {
  return absl::NotFoundError(absl::StrCat("node '", name, "' is not known (see trainyard nodes)"));
}
}  // namespace

void ControlState::UpdateSchedulable(NodeRt& node) {
  // The queue view carries the cluster's size (a queue's guarantee is a
  // share of it): a node that comes or goes changes it without a job event.
  publisher_.NodesChanged();
  publisher_.QueuesChanged();
  if (!node.in_scheduler) return;
  bool takes = NodeTable::TakesTasks(node);
  absl::Status st = scheduler_->SetSchedulable(node.info.name(), takes);
  if (!st.ok()) Say(LogLevel::kWarning, "node %s: %s", node.info.name(), std::string(st.message()));
  if (takes) wants_round_ = true;
}

absl::Status ControlState::Cordon(const std::string& name, const std::string& reason) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  node->cordoned = true;
  if (!node->draining) node->admin_reason = reason.empty() ? "cordoned by an admin" : absl::StrCat("cordoned: ", reason);
  UpdateSchedulable(*node);
  persister_.MarkNode(name);
  Say(LogLevel::kInfo, "node %s cordoned: %s", name, node->admin_reason);
  return absl::OkStatus();
}

absl::Status ControlState::Uncordon(const std::string& name) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  node->cordoned = node->draining = false;
  node->admin_reason.clear();
  if (node->cordoned_gpus != 0) {
    node->cordoned_gpus = 0;
    SyncExcludedGpus(*node);
    publisher_.TouchOwnView(*node);
  }
  node->launch_faults = 0;
  node->fault_reason.clear();
  UpdateSchedulable(*node);
  persister_.MarkNode(name);
  Say(LogLevel::kInfo, "node %s uncordoned", name);
  return absl::OkStatus();
}

absl::Status ControlState::CordonGpus(const std::string& name, const std::vector<int>& gpus, bool cordon) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  const int count = node->info.topology().gpu_count();
  uint64_t mask = 0;
  for (int g : gpus) {
    if (g < 0 || g >= count || g >= 64) {
      return absl::InvalidArgumentError(absl::StrCat("gpus: ", g, " is not a GPU of node ", name, " (it has ", count,
                                                     count > 0 ? absl::StrCat(": 0-", count - 1) : "", ")"));
    }
    mask |= uint64_t{1} << g;
  }
  node->cordoned_gpus = cordon ? node->cordoned_gpus | mask : node->cordoned_gpus & ~mask;
  SyncExcludedGpus(*node);
  publisher_.TouchOwnView(*node);
  publisher_.NodesChanged();
  persister_.MarkNode(name);
  Say(LogLevel::kInfo, "node %s: GPUs %s %s", name, core::GpuSet(mask).ToString(),
      cordon ? "cordoned" : "uncordoned");
  return absl::OkStatus();
}

absl::StatusOr<int> ControlState::Drain(const std::string& name, const std::string& reason, absl::Time now) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  node->draining = true;
  node->admin_reason = reason.empty() ? "drained by an admin" : absl::StrCat("drained: ", reason);
  UpdateSchedulable(*node);
  persister_.MarkNode(name);
  int evicted = 0;
  for (auto [job, i] : TasksOn(name)) {
    if (job->ending || job->preempting || job->task_rt[i].evicting) continue;
    EvictTask(*job, i, name, absl::StrCat("node ", name, " is drained"), now);
    ++evicted;
  }
  Say(LogLevel::kInfo, "node %s drained (%s): %d tasks leave it", name, node->admin_reason, evicted);
  return evicted;
}

void ControlState::EvictTask(JobRt& job, int i, const std::string& node, const std::string& why, absl::Time now) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  std::string tname = api::TaskName(job.rec.name(), t.role(), t.index());
  const v1::ReplicaSpec* rs = ReplicaOf(job, i);
  if (!rs || rs->restart_policy() == v1::RESTART_NEVER) {
    // The task may not be started again on its own: the whole job goes back
    // to the queue, as a preempted one does, once its tasks have stopped.
    StopForRequeue(job,
                   absl::StrCat("stopped because ", why, " (", tname,
                                " has restart policy Never, so it cannot move alone)"),
                   now);
    return;
  }
  job.task_rt[i].evicting = true;
  AddEvent(job, "task_evicted", absl::StrCat(tname, ": ", why, "; it is stopped and placed elsewhere"), now);
  SendKill(node, job.rec.name(), job.rec.id(), t.role(), t.index(), config_.kill_grace_ms, why);
  Persist(job);
}

void ControlState::MoveOrRequeue(JobRt& job, int i, const std::string& why, v1::AttemptClass c, absl::Time now) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  std::string tname = api::TaskName(job.rec.name(), t.role(), t.index());
  if (job.in_scheduler) {
    absl::Status st = scheduler_->TaskFinished(job.rec.name(), t.role(), t.index());
    if (!st.ok()) Say(LogLevel::kDebug, "%s: %s", job.rec.name(), std::string(st.message()));
  }
  if (!ReplaceTask(job, i, MoveWhy{why, /*charge=*/false, c}, now)) {
    RecordAttempt(job, i, {.attempt = t.attempt(), .attempt_class = c, .restarted = true, .charge = false}, now, &stats_);
    Requeue(job, absl::StrCat("task ", tname, " ", why, " and no other node can take it now"), now);
  }
  Persist(job);
}

void ControlState::MoveEvicted(JobRt& job, int i, const v1::TaskExit& exit, absl::Time now) {
  job.task_rt[i].evicting = false;
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  *t->mutable_exit() = exit;
  const NodeRt* node = FindNode(t->node());
  std::string fault = node ? GpuFaultWhy(*node, t->allocation().gpu_mask()) : "";
  if (fault.empty()) {
    MoveOrRequeue(job, i, absl::StrCat("was evicted from drained node ", t->node()), v1::ATTEMPT_PREEMPTED, now);
    return;
  }
  // Moved for its node's GPU fault: charged to its GPU-error budget
  // (unlimited unless restartBudgets.gpuError says otherwise).
  std::string gpu_why = absl::StrCat("was stopped because ", fault);
  if (job.in_scheduler) {
    absl::Status st = scheduler_->TaskFinished(job.rec.name(), t->role(), t->index());
    if (!st.ok()) Say(LogLevel::kDebug, "%s: %s", job.rec.name(), std::string(st.message()));
  }
  if (!MayRestart(job, i, v1::ATTEMPT_GPU_ERROR)) {
    std::string tname = api::TaskName(job.rec.name(), t->role(), t->index());
    SetTaskState(job, i, v1::TASK_FAILED, now);
    t->mutable_exit()->set_message(gpu_why);
    std::string budget = RecordAttempt(job, i, {.attempt = t->attempt(), .attempt_class = v1::ATTEMPT_GPU_ERROR}, now, &stats_);
    EndJob(job, v1::JOB_FAILED, absl::StrCat("task ", tname, " ", gpu_why, " (GPU_ERROR; ", budget, ")"), now);
    Persist(job);
    return;
  }
  if (!ReplaceTask(job, i, MoveWhy{gpu_why, /*charge=*/true, v1::ATTEMPT_GPU_ERROR}, now)) {
    RecordAttempt(job, i, {.attempt = t->attempt(), .attempt_class = v1::ATTEMPT_GPU_ERROR, .restarted = true}, now, &stats_);
    Requeue(job, absl::StrCat("task ", api::TaskName(job.rec.name(), t->role(), t->index()), " ", gpu_why,
                              " and no other node can take it now"),
            now);
  }
  Persist(job);
}

void ControlState::LaunchFault(const std::string& name, JobRt& job, int i, const v1::TaskStatus& st, absl::Time now) {
  NodeRt* node = FindNode(name);
  if (node != nullptr && st.gpus_held()) {
    // Not the node's fault: a task the server does not count here still
    // holds the GPUs. They stay out of placement until it is gone.
    node->held_gpus |= job.rec.tasks(i).allocation().gpu_mask();
    SyncExcludedGpus(*node);
  } else if (node != nullptr) {
    ++node->launch_faults;
    if (node->launch_faults >= config_.node_launch_faults_to_degrade && node->fault_reason.empty()) {
      node->fault_reason = absl::StrCat(node->launch_faults, " launches in a row failed on it: ", st.exit().message());
      Say(LogLevel::kWarning, "node %s is taken out of placement: %s", name, node->fault_reason);
      UpdateSchedulable(*node);
    }
  }
  *job.rec.mutable_tasks(i)->mutable_exit() = st.exit();
  MoveOrRequeue(job, i, absl::StrCat("could not be started on node ", name, " (", st.exit().message(), ")"),
                v1::ATTEMPT_LAUNCH_FAILED, now);
}

void ControlState::ApplyGpuFaults(NodeRt& node, absl::Time now) {
  const std::string& name = node.info.name();
  const int count = node.info.topology().gpu_count();
  const uint64_t all = count >= 64 ? ~uint64_t{0} : (uint64_t{1} << std::max(count, 0)) - 1;
  uint64_t faulty = api::FaultyGpus(node.info) & all;
  std::string drain;
  for (const v1::GpuFault& f : node.info.gpu_faults()) {
    if (f.action() == v1::GPU_FAULT_DRAIN_NODE && drain.empty()) {
      drain = absl::StrCat("drained for GPU ", f.gpu(), ": ", FaultName(f));
    }
  }
  if (faulty == node.faulty_gpus && drain == node.health_reason) return;
  if (faulty != node.faulty_gpus) {
    Say(LogLevel::kWarning, "node %s: GPUs %s out of service (faulty)", name,
        core::GpuSet(faulty).ToString());
  }
  if (drain != node.health_reason && !drain.empty()) Say(LogLevel::kWarning, "node %s %s", name, drain);
  node.faulty_gpus = faulty;
  node.health_reason = drain;
  UpdateSchedulable(node);
  SyncExcludedGpus(node);
  persister_.MarkNode(name);
  publisher_.TouchOwnView(node);
  publisher_.NodesChanged();
  // The tasks on a faulty GPU (every task, on a node drained for one) leave.
  int moved = 0;
  for (auto [job, i] : TasksOn(name)) {
    const v1::TaskRecord& t = job->rec.tasks(i);
    if (job->ending || job->preempting || job->task_rt[i].evicting || api::IsTerminal(t.state())) continue;
    std::string why = GpuFaultWhy(node, t.allocation().gpu_mask());
    if (why.empty()) continue;
    EvictTask(*job, i, name, why, now);
    ++moved;
  }
  if (moved > 0) Say(LogLevel::kInfo, "node %s: %d tasks leave for its GPU faults", name, moved);
}

void ControlState::SyncExcludedGpus(NodeRt& node) {
  uint64_t excluded = node.reported_busy_gpus | node.faulty_gpus | node.cordoned_gpus | node.held_gpus;
  if (excluded == node.busy_gpus || !node.in_scheduler) return;
  absl::Status st = scheduler_->SetExcludedGpus(node.info.name(), core::GpuSet(excluded));
  if (!st.ok()) {
    Say(LogLevel::kWarning, "node %s: %s", node.info.name(), std::string(st.message()));
    return;
  }
  node.busy_gpus = excluded;
  publisher_.TouchOwnView(node);
  wants_round_ = true;
}

void ControlState::CheckDisk(NodeRt& node, const v1::Heartbeat& hb) {
  if (!hb.has_data_free_mb()) return;
  node.data_free_mb = hb.data_free_mb();
  std::string reason;
  if (node.data_free_mb < config_.min_node_free_disk_mb) {
    reason = absl::StrCat("only ", node.data_free_mb, " MB free in the agent's data dir (below ",
                          config_.min_node_free_disk_mb, " MB)");
  }
  if (reason == node.disk_reason) return;
  if (!reason.empty()) Say(LogLevel::kWarning, "node %s is taken out of placement: %s", node.info.name(), reason);
  node.disk_reason = reason;
  UpdateSchedulable(node);
}

absl::Status ControlState::RemoveNode(const std::string& name, absl::Time now) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  if (node->state != v1::NODE_LOST || node->connected()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", name, " is not LOST (its agent is ", node->connected() ? "connected" : "still heard from",
        "); only a LOST node can be removed: drain it, stop its agent and wait until `trainyard nodes` shows it LOST"));
  }
  // Tasks recovered from the store that were placed there go elsewhere now.
  if (!TasksOn(name).empty()) NodeLost(*node, now);
  if (node->in_scheduler) {
    std::vector<std::string> requeued;
    absl::Status st = scheduler_->RemoveNode(name, &requeued);
    if (!st.ok()) Say(LogLevel::kWarning, "node %s: %s", name, std::string(st.message()));
  }
  nodes_.Remove(name);
  node_jobs_.erase(name);
  stale_files_.erase(name);
  persister_.MarkNode(name);  // written as a deletion: the node is gone
  publisher_.NodesChanged();
  publisher_.QueuesChanged();
  Say(LogLevel::kInfo, "node %s removed", name);
  return absl::OkStatus();
}

}  // namespace trainyard::server
