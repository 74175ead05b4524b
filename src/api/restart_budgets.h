// Failure classes and their restart budgets: how an ended attempt is
// classified, how many restarts each class allows a task (`maxRestarts` for
// program failures, `restartBudgets` for the others, their defaults), and
// how the budgets are shown. One home for these rules: the agent (which
// classifies what it sees and restarts in place), the server's control state
// (which counts and decides the rest), the views and the CLI call them.
#pragma once

#include <string>
#include <vector>

#include "proto/service.pb.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// Restarts a class allows when its budget is unlimited.
inline constexpr int kUnlimitedRestarts = -1;

// The class of an attempt that ended with `exit`, as its agent sees it:
// OOM_KILLED when the kernel killed it at its memory limit, SUCCEEDED for
// exit code 0 with no signal, FAILED otherwise. `launch_failed`: its process
// could not be started (LAUNCH_FAILED).
v1::AttemptClass ClassOfExit(const v1::TaskExit& exit, bool launch_failed);

// "FAILED", "OOM_KILLED", ... (the enum's name without ATTEMPT_); "" for
// UNSPECIFIED.
std::string AttemptClassName(v1::AttemptClass c);

// The word a budget is called by in events and describe: "failure" (for
// FAILED and LAUNCH_FAILED: a command that cannot start would fail again),
// "OOM", "node-loss", "GPU-error".
std::string BudgetName(v1::AttemptClass c);

// Whether restarts after an attempt of class `c` are counted in a budget
// (FAILED and LAUNCH_FAILED share one; OOM_KILLED, NODE_LOST, GPU_ERROR). Preemptions,
// deadlines and kills are never charged.
bool HasBudget(v1::AttemptClass c);

// Restarts role `rs` allows per task after attempts of class `c`
// (kUnlimitedRestarts: no limit; 0 for a class without a budget). FAILED
// and LAUNCH_FAILED: maxRestarts, 0 under restartPolicy Never. OOM_KILLED:
// restartBudgets.oom, else as FAILED. NODE_LOST: restartBudgets.nodeLost,
// else unlimited (0 under Never); GPU_ERROR likewise (restartBudgets.gpuError).
int RestartLimit(const v1::ReplicaSpec& rs, v1::AttemptClass c);

// Restarts of class `c` spent (0 for a class without a budget).
int RestartsSpent(const v1::RestartCounts& counts, v1::AttemptClass c);

// Adds one restart of class `c` to `counts` (nothing for a class without a
// budget).
void SpendRestart(v1::RestartCounts* counts, v1::AttemptClass c);

// Restarts of class `c` left to a task of `rs` that spent `counts`
// (kUnlimitedRestarts: no limit).
int RestartsLeft(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts, v1::AttemptClass c);

// Class `c`'s budget: its limit, spent and left.
v1::RestartBudgetView BudgetView(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts, v1::AttemptClass c);

// "OOM budget 0 of 1 left", "node-loss budget unlimited".
std::string BudgetText(const v1::RestartBudgetView& budget);
std::string BudgetText(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts, v1::AttemptClass c);

// Each budgeted class's limit, spent and left, in class order.
std::vector<v1::RestartBudgetView> BudgetViews(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts);

// Whether a preemption now would end `job`: a task of it has spent its
// role's preemption budget (restartBudgets.preemption).
bool PreemptionWouldEnd(const v1::JobRecord& job);

// A task record stored before restarts were counted per class (no
// restarts_by_class, restart_count above 0): every restart it counted was
// spent in maxRestarts then, so its failure budget starts spent by as many.
void UpgradeRestartCounts(v1::TaskRecord* task);

// Ended attempts kept per task: the last kMaxAttemptEnds, fewer in a job of
// many tasks, so that the job's record (written whole on each change) and
// its view hold about kMaxJobAttemptEnds at most, and at least each task's
// last.
inline constexpr int kMaxAttemptEnds = 100;
inline constexpr int kMaxJobAttemptEnds = 4000;
int AttemptEndsKept(int tasks_in_job);

// Appends `end` to `attempts`, keeping the last `keep` (1 or more).
void RecordAttemptEnd(google::protobuf::RepeatedPtrField<v1::AttemptEnd>* attempts, v1::AttemptEnd end,
                      int keep = kMaxAttemptEnds);

}  // namespace trainyard::api
