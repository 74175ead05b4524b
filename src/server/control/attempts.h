// The classes of ended attempts (api/restart_budgets.h), as the control
// state records them: each end of a task's attempt is kept with its class
// (the agent's word for FAILED, OOM_KILLED and LAUNCH_FAILED; the server's
// for the rest), a restart is charged to its class's budget, and /metrics
// counts the ends by class and queue. Functions of one job's record.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "proto/service.pb.h"
#include "server/stats.h"

namespace trainyard::server {

struct JobRt;  // job_rt.h

// The class of an attempt's end that `status` reports: the agent's (FAILED,
// OOM_KILLED, LAUNCH_FAILED, SUCCEEDED), unless the server stopped it
// (PREEMPTED, RESIZED, DEADLINE_EXCEEDED, KILLED).
v1::AttemptClass ClassOfEnd(const JobRt& job, const v1::TaskStatus& status);

struct AttemptEndInfo {
  int attempt = 0;
  v1::AttemptClass attempt_class = v1::ATTEMPT_CLASS_UNSPECIFIED;
  v1::TaskExit exit;
  bool restarted = false;  // a restart follows
  bool charge = true;      // the restart is charged to its class's budget
};

// Records the end of task `task`'s attempt (TaskRecord.attempts), charges a
// restart to its class and counts it in `stats` (for /metrics). Returns the
// budget's text after the charge ("OOM budget 0 of 1 left"), "" for a class
// without one.
std::string RecordAttempt(JobRt& job, int task, const AttemptEndInfo& end, absl::Time now, ManagerStats* stats);

// Whether the task's budget for class `c` has a restart left.
bool MayRestart(const JobRt& job, int task, v1::AttemptClass c);

}  // namespace trainyard::server
