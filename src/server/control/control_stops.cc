// ControlState: tasks stopped on purpose rather than lost — a node whose
// agent is shutting down (its jobs go back to the queue without charging a
// restart, as after a preemption) and a worker its job master found hung
// (that attempt is stopped as a failure, and its restart policy decides).
#include "absl/strings/str_cat.h"
#include "api/convert.h"
#include "api/roles.h"
#include "common/logging.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

void ControlState::AgentDraining(const std::string& name, const std::string& reason, absl::Time now) {
  NodeRt* found = FindNode(name);
  if (!found) return;
  NodeRt& node = *found;
  node.agent_stopping = true;
  node.stop_reason = reason.empty() ? "its agent is stopping" : reason;
  node.drained_sent = false;
  UpdateSchedulable(node);
  std::string note = absl::StrCat("stopped with node ", name, " (", reason.empty() ? "its agent is stopping" : reason,
                                  ") at ", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()));
  Say(LogLevel::kInfo, "node %s is stopping: its jobs go back to the queue", name);
  for (auto [job, i] : TasksOn(name)) {
    if (!job->ending && !job->preempting) {
      StopForRequeue(*job, note, now);
    } else if (job->checkpoint.id() > 0) {
      // Saving for a preemption or a time limit: no time for it now.
      AddEvent(*job, "checkpoint", absl::StrCat(note, "; its tasks are stopped without waiting for the checkpoint"),
               now);
      EndCheckpointOrder(*job);
      KillTasks(*job, config_.kill_grace_ms, note);
    }
  }
  MaybeDrained(name);
}

void ControlState::StopForRequeue(JobRt& job, const std::string& note, absl::Time now) {
  job.preempting = true;
  preempting_.insert(job.rec.name());
  job.preempted_by.clear();
  job.preempted_note = note;
  job.preempt_deadline = now;
  AddEvent(job, "stopping", absl::StrCat(note, "; its tasks are stopped and the job goes back to the queue "
                                              "(no restart is charged)"), now);
  // Its node is going away: no time for a checkpoint order.
  KillTasks(job, config_.kill_grace_ms, note);
  MaybeFinish(job, now);
  Persist(job);
}

void ControlState::MaybeDrained(const std::string& name) {
  NodeRt* n = FindNode(name);
  if (!n || !n->agent_stopping || n->drained_sent) return;
  if (!TasksOn(name).empty()) return;
  n->drained_sent = true;
  if (n->connected()) backend_->Drained(name);
}

absl::Status ControlState::FromCurrentMaster(const JobRt& job, const std::string& master_address) const {
  if (master_address.empty() || job.job_master.empty() || master_address == job.job_master) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("job ", job.rec.name(), ": the job master at ", master_address,
                                                    " was replaced by the one at ", job.job_master,
                                                    "; its report is ignored"));
}

absl::Status ControlState::WorkerFailed(const v1::WorkerFailureRequest& req, absl::Time now) {
  JobRt* job = FindJob(req.job());
  if (!job) return absl::NotFoundError(absl::StrCat("job '", req.job(), "' does not exist"));
  if (absl::Status from = FromCurrentMaster(*job, req.master_address()); !from.ok()) return from;
  int i = -1;
  for (int k = 0; k < job->rec.tasks_size(); ++k) {
    const v1::TaskRecord& t = job->rec.tasks(k);
    if (t.worker_id() == req.worker_id() && api::TraitsOf(job->rec.spec(), t.role()).worker) i = k;
  }
  if (i < 0) {
    return absl::NotFoundError(absl::StrCat("job ", req.job(), " has no worker ", req.worker_id()));
  }
  const v1::TaskRecord& t = job->rec.tasks(i);
  // Already ending, or that attempt is over (the process ended and was
  // restarted meanwhile): the report is late and changes nothing.
  if (job->ending || job->preempting || api::IsTerminal(t.state()) || t.node().empty() ||
      req.attempt() < t.attempt()) {
    return absl::OkStatus();
  }
  std::string name = api::TaskName(job->rec.name(), t.role(), t.index());
  AddEvent(*job, "task_failed",
           absl::StrCat(name, " (worker ", req.worker_id(), ") failed in attempt ", req.attempt(), ": ", req.reason(),
                        "; its attempt is stopped and its restart policy decides"),
           now);
  v1::KillTask k;
  k.set_job(job->rec.name());
  k.set_job_id(job->rec.id());
  k.set_role(t.role());
  k.set_index(t.index());
  k.set_grace_ms(config_.kill_grace_ms);
  k.set_reason(req.reason());
  k.set_fail_attempt(true);
  k.set_attempt(req.attempt());
  const NodeRt* n = FindNode(t.node());
  if (n && n->connected()) orders_.Kill(t.node(), k);
  return absl::OkStatus();
}

}  // namespace trainyard::server
