// The classes of ended attempts and their restart budgets (attempts.h).
#include "server/control/attempts.h"

#include "absl/strings/str_cat.h"
#include "api/restart_budgets.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

v1::AttemptClass ClassOfEnd(const JobRt& job, const v1::TaskStatus& st) {
  if (job.preempting) return job.resizing ? v1::ATTEMPT_RESIZED : v1::ATTEMPT_PREEMPTED;
  if (job.ending) {
    return job.rec.state() == v1::JOB_DEADLINE_EXCEEDED ? v1::ATTEMPT_DEADLINE_EXCEEDED : v1::ATTEMPT_KILLED;
  }
  if (st.state() == v1::TASK_KILLED) return v1::ATTEMPT_KILLED;
  v1::AttemptClass c = st.attempt_class();
  // An agent from before classes were carried: classified from its exit.
  if (c == v1::ATTEMPT_CLASS_UNSPECIFIED) c = api::ClassOfExit(st.exit(), /*launch_failed=*/false);
  if (c == v1::ATTEMPT_SUCCEEDED && st.state() != v1::TASK_SUCCEEDED) c = v1::ATTEMPT_FAILED;
  return c;
}

std::string RecordAttempt(JobRt& job, int i, const AttemptEndInfo& end, absl::Time now, ManagerStats* stats) {
  v1::TaskRecord* t = job.rec.mutable_tasks(i);
  v1::AttemptEnd a;
  a.set_attempt(end.attempt);
  a.set_attempt_class(end.attempt_class);
  a.set_exit_code(end.exit.exit_code());
  a.set_signal(end.exit.signal());
  a.set_node(t->node());
  a.set_end_time_ms(ToMs(now));
  a.set_restarted(end.restarted);
  api::RecordAttemptEnd(t->mutable_attempts(), std::move(a), api::AttemptEndsKept(job.rec.tasks_size()));
  ++stats->attempts_ended[{job.rec.spec().queue(), api::AttemptClassName(end.attempt_class)}];
  const v1::ReplicaSpec* rs = ReplicaOf(job, i);
  // A restart after a success (restartPolicy Always) is counted where the
  // agent counts it: in maxRestarts, the failure budget.
  v1::AttemptClass charged = end.attempt_class == v1::ATTEMPT_SUCCEEDED ? v1::ATTEMPT_FAILED : end.attempt_class;
  // A preemption is charged once, when the job's tasks have stopped
  // (EndPreemption), not for a restart during its checkpoint window.
  if (end.restarted && end.charge && charged != v1::ATTEMPT_PREEMPTED) {
    api::SpendRestart(t->mutable_restarts_by_class(), charged);
  }
  if (!rs || !api::HasBudget(charged)) return "";
  return api::BudgetText(*rs, t->restarts_by_class(), charged);
}

bool MayRestart(const JobRt& job, int i, v1::AttemptClass c) {
  const v1::ReplicaSpec* rs = ReplicaOf(job, i);
  return rs && api::RestartsLeft(*rs, job.rec.tasks(i).restarts_by_class(), c) != 0;
}

}  // namespace trainyard::server
