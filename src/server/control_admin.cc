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
#include "api/roles.h"
#include "common/logging.h"
#include "server/control_state.h"
#include "server/control_state_internal.h"

namespace trainyard::server {

ControlState::NodeRt* ControlState::FindNode(const std::string& name) {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? nullptr : it->second;
}

const ControlState::NodeRt* ControlState::FindNode(const std::string& name) const {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? nullptr : it->second;
}

ControlState::NodeRt& ControlState::AddNode(const std::string& name, std::unique_ptr<NodeRt> node) {
  NodeRt& added = *node;
  node_index_[name] = &added;
  nodes_[name] = std::move(node);
  return added;
}

namespace {
absl::Status UnknownNode(const std::string& name) {
  return absl::NotFoundError(absl::StrCat("node '", name, "' is not known (see trainyard nodes)"));
}
}  // namespace

void ControlState::UpdateSchedulable(NodeRt& node) {
  // The queue view carries the cluster's size (a queue's guarantee is a
  // share of it): a node that comes or goes changes it without a job event.
  view_nodes_ = view_queues_ = true;
  if (!node.in_scheduler) return;
  bool takes = node.connected() && node.state == v1::NODE_READY && !node.agent_stopping && !node.cordoned &&
               !node.draining && !node.degraded();
  absl::Status st = scheduler_->SetSchedulable(node.info.name(), takes);
  if (!st.ok()) Log(LogLevel::kWarning, "server", "node %s: %s", node.info.name(), std::string(st.message()));
  if (takes) wants_round_ = true;
}

v1::NodeState ControlState::ShownState(const NodeRt& node) {
  if (node.state == v1::NODE_LOST) return v1::NODE_LOST;
  if (node.draining || node.agent_stopping) return v1::NODE_DRAINING;
  if (node.cordoned) return v1::NODE_CORDONED;
  if (node.degraded()) return v1::NODE_DEGRADED;
  return v1::NODE_READY;
}

std::string ControlState::ShownReason(const NodeRt& node) {
  std::vector<std::string> why;
  if (node.agent_stopping) why.push_back(node.stop_reason);
  if (node.draining || node.cordoned) why.push_back(node.admin_reason);
  if (!node.fault_reason.empty()) why.push_back(node.fault_reason);
  if (!node.disk_reason.empty()) why.push_back(node.disk_reason);
  return absl::StrJoin(why, "; ");
}

absl::Status ControlState::Cordon(const std::string& name, const std::string& reason) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  node->cordoned = true;
  if (!node->draining) node->admin_reason = reason.empty() ? "cordoned by an admin" : absl::StrCat("cordoned: ", reason);
  UpdateSchedulable(*node);
  persister_.MarkNode(name);
  Log(LogLevel::kInfo, "server", "node %s cordoned: %s", name, node->admin_reason);
  return absl::OkStatus();
}

absl::Status ControlState::Uncordon(const std::string& name) {
  NodeRt* node = FindNode(name);
  if (!node) return UnknownNode(name);
  node->cordoned = node->draining = false;
  node->admin_reason.clear();
  node->launch_faults = 0;
  node->fault_reason.clear();
  UpdateSchedulable(*node);
  persister_.MarkNode(name);
  Log(LogLevel::kInfo, "server", "node %s uncordoned", name);
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
    if (job->ending || job->preempting || job->evicting[i]) continue;
    EvictTask(*job, i, name, now);
    ++evicted;
  }
  Log(LogLevel::kInfo, "server", "node %s drained (%s): %d tasks leave it", name, node->admin_reason, evicted);
  return evicted;
}

void ControlState::EvictTask(JobRt& job, int i, const std::string& node, absl::Time now) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  std::string tname = api::TaskName(job.rec.name(), t.role(), t.index());
  const v1::ReplicaSpec* rs = ReplicaOf(job, i);
  if (!rs || rs->restart_policy() == v1::RESTART_NEVER) {
    // The task may not be started again on its own: the whole job goes back
    // to the queue, as a preempted one does, once its tasks have stopped.
    StopForRequeue(job,
                   absl::StrCat("stopped by the drain of node ", node, " (", tname,
                                " has restart policy Never, so it cannot move alone)"),
                   now);
    return;
  }
  job.evicting[i] = true;
  AddEvent(job, "task_evicted", absl::StrCat(tname, ": node ", node, " is drained; it is stopped and placed elsewhere"),
           now);
  SendKill(node, job.rec.name(), job.rec.id(), t.role(), t.index(), config_.kill_grace_ms,
           absl::StrCat("node ", node, " is drained"));
  Persist(job);
}

void ControlState::MoveOrRequeue(JobRt& job, int i, const std::string& why, v1::AttemptClass c, absl::Time now) {
  const v1::TaskRecord& t = job.rec.tasks(i);
  std::string tname = api::TaskName(job.rec.name(), t.role(), t.index());
  if (job.in_scheduler) {
    absl::Status st = scheduler_->TaskFinished(job.rec.name(), t.role(), t.index());
    if (!st.ok()) Log(LogLevel::kDebug, "server", "%s: %s", job.rec.name(), std::string(st.message()));
  }
  if (!ReplaceTask(job, i, MoveWhy{why, /*charge=*/false, c}, now)) {
    RecordAttempt(job, i, {.attempt = t.attempt(), .attempt_class = c, .restarted = true, .charge = false}, now);
    Requeue(job, absl::StrCat("task ", tname, " ", why, " and no other node can take it now"), now);
  }
  Persist(job);
}

void ControlState::MoveEvicted(JobRt& job, int i, const v1::TaskExit& exit, absl::Time now) {
  job.evicting[i] = false;
  *job.rec.mutable_tasks(i)->mutable_exit() = exit;
  MoveOrRequeue(job, i, absl::StrCat("was evicted from drained node ", job.rec.tasks(i).node()),
                v1::ATTEMPT_PREEMPTED, now);
}

void ControlState::LaunchFault(const std::string& name, JobRt& job, int i, const v1::TaskStatus& st, absl::Time now) {
  if (NodeRt* node = FindNode(name)) {
    ++node->launch_faults;
    if (node->launch_faults >= config_.node_launch_faults_to_degrade && node->fault_reason.empty()) {
      node->fault_reason = absl::StrCat(node->launch_faults, " launches in a row failed on it: ", st.exit().message());
      Log(LogLevel::kWarning, "server", "node %s is taken out of placement: %s", name, node->fault_reason);
      UpdateSchedulable(*node);
    }
  }
  *job.rec.mutable_tasks(i)->mutable_exit() = st.exit();
  MoveOrRequeue(job, i, absl::StrCat("could not be started on node ", name, " (", st.exit().message(), ")"),
                v1::ATTEMPT_LAUNCH_FAILED, now);
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
  if (!reason.empty()) Log(LogLevel::kWarning, "server", "node %s is taken out of placement: %s", node.info.name(), reason);
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
    if (!st.ok()) Log(LogLevel::kWarning, "server", "node %s: %s", name, std::string(st.message()));
  }
  node_index_.erase(name);
  nodes_.erase(name);
  node_jobs_.erase(name);
  stale_files_.erase(name);
  persister_.MarkNode(name);  // written as a deletion: the node is gone
  view_nodes_ = view_queues_ = true;
  Log(LogLevel::kInfo, "server", "node %s removed", name);
  return absl::OkStatus();
}

}  // namespace trainyard::server
