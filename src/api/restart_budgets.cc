// Failure classes and restart budgets (restart_budgets.h).
#include "api/restart_budgets.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace trainyard::api {
namespace {

constexpr v1::AttemptClass kBudgeted[] = {v1::ATTEMPT_FAILED, v1::ATTEMPT_OOM_KILLED, v1::ATTEMPT_NODE_LOST,
                                          v1::ATTEMPT_GPU_ERROR, v1::ATTEMPT_PREEMPTED};

int FailureLimit(const v1::ReplicaSpec& rs) {
  return rs.restart_policy() == v1::RESTART_NEVER ? 0 : rs.max_restarts();
}

}  // namespace

v1::AttemptClass ClassOfExit(const v1::TaskExit& exit, bool launch_failed) {
  if (launch_failed) return v1::ATTEMPT_LAUNCH_FAILED;
  if (exit.oom_killed()) return v1::ATTEMPT_OOM_KILLED;
  if (exit.exit_code() == 0 && exit.signal() == 0) return v1::ATTEMPT_SUCCEEDED;
  return v1::ATTEMPT_FAILED;
}

std::string AttemptClassName(v1::AttemptClass c) {
  if (c == v1::ATTEMPT_CLASS_UNSPECIFIED) return "";
  std::string name = v1::AttemptClass_Name(c);
  return name.substr(sizeof("ATTEMPT_") - 1);
}

std::string BudgetName(v1::AttemptClass c) {
  switch (c) {
    case v1::ATTEMPT_OOM_KILLED: return "OOM";
    case v1::ATTEMPT_NODE_LOST: return "node-loss";
    case v1::ATTEMPT_GPU_ERROR: return "GPU-error";
    case v1::ATTEMPT_PREEMPTED: return "preemption";
    default: return "failure";
  }
}

bool HasBudget(v1::AttemptClass c) {
  return c == v1::ATTEMPT_FAILED || c == v1::ATTEMPT_OOM_KILLED || c == v1::ATTEMPT_NODE_LOST ||
         c == v1::ATTEMPT_LAUNCH_FAILED || c == v1::ATTEMPT_GPU_ERROR || c == v1::ATTEMPT_PREEMPTED;
}

int RestartLimit(const v1::ReplicaSpec& rs, v1::AttemptClass c) {
  const v1::RestartBudgets& b = rs.restart_budgets();
  switch (c) {
    case v1::ATTEMPT_FAILED:
    case v1::ATTEMPT_LAUNCH_FAILED: return FailureLimit(rs);
    case v1::ATTEMPT_OOM_KILLED: return b.has_oom() ? b.oom() : FailureLimit(rs);
    case v1::ATTEMPT_NODE_LOST:
      if (b.has_node_lost()) return b.node_lost();
      return rs.restart_policy() == v1::RESTART_NEVER ? 0 : kUnlimitedRestarts;
    case v1::ATTEMPT_GPU_ERROR:
      if (b.has_gpu_error()) return b.gpu_error();
      return rs.restart_policy() == v1::RESTART_NEVER ? 0 : kUnlimitedRestarts;
    case v1::ATTEMPT_PREEMPTED:  // unlimited under Never too: the job is requeued whole, not restarted
      return b.has_preemption() ? b.preemption() : kUnlimitedRestarts;
    default: return 0;
  }
}

int RestartsSpent(const v1::RestartCounts& counts, v1::AttemptClass c) {
  switch (c) {
    case v1::ATTEMPT_FAILED:
    case v1::ATTEMPT_LAUNCH_FAILED: return counts.failure();
    case v1::ATTEMPT_OOM_KILLED: return counts.oom();
    case v1::ATTEMPT_NODE_LOST: return counts.node_lost();
    case v1::ATTEMPT_GPU_ERROR: return counts.gpu_error();
    case v1::ATTEMPT_PREEMPTED: return counts.preemption();
    default: return 0;
  }
}

void SpendRestart(v1::RestartCounts* counts, v1::AttemptClass c) {
  switch (c) {
    case v1::ATTEMPT_FAILED:
    case v1::ATTEMPT_LAUNCH_FAILED: counts->set_failure(counts->failure() + 1); break;
    case v1::ATTEMPT_OOM_KILLED: counts->set_oom(counts->oom() + 1); break;
    case v1::ATTEMPT_NODE_LOST: counts->set_node_lost(counts->node_lost() + 1); break;
    case v1::ATTEMPT_GPU_ERROR: counts->set_gpu_error(counts->gpu_error() + 1); break;
    case v1::ATTEMPT_PREEMPTED: counts->set_preemption(counts->preemption() + 1); break;
    default: break;
  }
}

int RestartsLeft(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts, v1::AttemptClass c) {
  int limit = RestartLimit(rs, c);
  if (limit < 0) return kUnlimitedRestarts;
  return std::max(0, limit - RestartsSpent(counts, c));
}

v1::RestartBudgetView BudgetView(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts, v1::AttemptClass c) {
  v1::RestartBudgetView v;
  v.set_attempt_class(c);
  v.set_limit(RestartLimit(rs, c));
  v.set_spent(RestartsSpent(counts, c));
  v.set_left(RestartsLeft(rs, counts, c));
  return v;
}

std::string BudgetText(const v1::RestartBudgetView& b) {
  if (b.limit() < 0) return absl::StrCat(BudgetName(b.attempt_class()), " budget unlimited");
  return absl::StrCat(BudgetName(b.attempt_class()), " budget ", b.left(), " of ", b.limit(), " left");
}

std::string BudgetText(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts, v1::AttemptClass c) {
  return BudgetText(BudgetView(rs, counts, c));
}

std::vector<v1::RestartBudgetView> BudgetViews(const v1::ReplicaSpec& rs, const v1::RestartCounts& counts) {
  std::vector<v1::RestartBudgetView> out;
  for (v1::AttemptClass c : kBudgeted) out.push_back(BudgetView(rs, counts, c));
  return out;
}

bool PreemptionWouldEnd(const v1::JobRecord& job) {
  // One pass over the tasks, whatever the number of roles (5,000 roles
  // of a 10,000-task job would be 50 M compares role by role).
  absl::flat_hash_map<absl::string_view, const v1::ReplicaSpec*> counted;
  for (const v1::ReplicaSpec& rs : job.spec().replicas()) {
    if (rs.restart_budgets().has_preemption()) counted.emplace(rs.role(), &rs);  // else unlimited
  }
  if (counted.empty()) return false;
  for (const v1::TaskRecord& t : job.tasks()) {
    auto it = counted.find(t.role());
    if (it != counted.end() && RestartsLeft(*it->second, t.restarts_by_class(), v1::ATTEMPT_PREEMPTED) == 0) {
      return true;
    }
  }
  return false;
}

void UpgradeRestartCounts(v1::TaskRecord* task) {
  if (task->has_restarts_by_class() || task->restart_count() <= 0) return;
  task->mutable_restarts_by_class()->set_failure(task->restart_count());
}

int AttemptEndsKept(int tasks_in_job) {
  return std::clamp(kMaxJobAttemptEnds / std::max(1, tasks_in_job), 1, kMaxAttemptEnds);
}

void RecordAttemptEnd(google::protobuf::RepeatedPtrField<v1::AttemptEnd>* attempts, v1::AttemptEnd end, int keep) {
  keep = std::max(1, keep);
  if (attempts->size() >= keep) attempts->DeleteSubrange(0, attempts->size() - keep + 1);
  *attempts->Add() = std::move(end);
}

}  // namespace trainyard::api
