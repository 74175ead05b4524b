// The role table (see roles.h).
#include "api/roles.h"

#include <algorithm>
#include <set>
#include <map>

#include "absl/strings/str_cat.h"

namespace trainyard::api {

RoleTraits TraitsOf(v1::Framework framework, std::string_view role) {
  RoleTraits t;
  bool mpi = framework == v1::FRAMEWORK_MPI;
  t.job_master = role == kRoleJobMaster;
  bool tf_evaluator = framework == v1::FRAMEWORK_TENSORFLOW && role == kRoleEvaluator;
  t.decides_job = mpi && role == kRoleLauncher;
  t.worker = role != kRolePs && !t.job_master && !t.decides_job && !tf_evaluator;
  t.decides_success = role == kRoleChief || role == kRoleMaster;
  t.in_tf_cluster = !t.job_master && role != kRoleEvaluator;
  t.torch_rank = t.worker;
  t.torch_rank0 = role == kRoleMaster;
  t.mpi_host = mpi && t.worker;
  switch (framework) {
    case v1::FRAMEWORK_TENSORFLOW:
      t.default_port = !t.job_master;
      t.uses_job_master = t.worker;
      break;
    case v1::FRAMEWORK_PYTORCH:
      t.default_port = role == kRoleMaster || role == kRoleWorker;
      break;
    case v1::FRAMEWORK_MPI:
      // A rank host's port: `trainyard rsh --serve` listens there for the
      // launcher's mpirun (docs/job-spec.md, "Framework rules").
      t.default_port = t.mpi_host;
      break;
    default:
      t.uses_job_master = t.worker;
      break;
  }
  return t;
}

RoleTraits TraitsOf(v1::Framework framework, const v1::ReplicaSpec& rs) {
  if (rs.kind() != v1::ROLE_KIND_SERVICE) return TraitsOf(framework, rs.role());
  RoleTraits t;
  t.default_port = true;
  t.service = true;
  return t;
}

RoleTraits TraitsOf(const v1::JobSpec& spec, std::string_view role) {
  for (const v1::ReplicaSpec& rs : spec.replicas()) {
    if (rs.role() == role) return TraitsOf(spec.framework(), rs);
  }
  return TraitsOf(spec.framework(), role);
}

bool IsFrameworkRoleName(std::string_view role) {
  for (std::string_view name : {kRoleWorker, kRolePs, kRoleChief, kRoleMaster, kRoleLauncher, kRoleEvaluator,
                                kRoleJobMaster}) {
    if (role == name) return true;
  }
  return false;
}

bool IsWorkerRole(v1::Framework framework, std::string_view role) { return TraitsOf(framework, role).worker; }

bool IsJobMasterRole(std::string_view role) { return role == kRoleJobMaster; }

bool HasJobMaster(const v1::JobSpec& spec) {
  return !spec.job_master_address().empty() ||
         std::any_of(spec.replicas().begin(), spec.replicas().end(),
                     [](const v1::ReplicaSpec& rs) { return IsJobMasterRole(rs.role()); });
}

int WorkerCount(const v1::JobSpec& spec) {
  int n = 0;
  for (const auto& rs : spec.replicas()) {
    if (TraitsOf(spec.framework(), rs).worker) n += rs.count();
  }
  return n;
}

bool IsElastic(const v1::JobSpec& spec) {
  return std::any_of(spec.replicas().begin(), spec.replicas().end(),
                     [](const v1::ReplicaSpec& rs) { return rs.min_count() > 0; });
}

bool UsesJobMaster(const v1::JobSpec& spec) {
  // `jobmaster:` in the spec overrides the framework's rule: true makes every
  // worker role talk to a master (a pytorch job's ranks, for its checkpoint
  // orders), false none.
  if (spec.has_jobmaster() && !spec.jobmaster()) return false;
  return std::any_of(spec.replicas().begin(), spec.replicas().end(), [&](const v1::ReplicaSpec& rs) {
    RoleTraits t = TraitsOf(spec.framework(), rs);
    return rs.count() > 0 && (spec.has_jobmaster() ? t.worker : t.uses_job_master);
  });
}

int JobTaskCount(const TaskRecords& tasks) {
  return static_cast<int>(std::count_if(tasks.begin(), tasks.end(),
                                        [](const v1::TaskRecord& t) { return !IsJobMasterRole(t.role()); }));
}

std::optional<std::string> SuccessAfter(const v1::JobSpec& spec, const TaskRecords& tasks,
                                        const v1::TaskRecord& ended) {
  v1::Framework fw = spec.framework();
  auto done = [](const v1::TaskRecord& t) { return t.state() == v1::TASK_SUCCEEDED; };
  bool has_decider = std::any_of(tasks.begin(), tasks.end(), [&](const v1::TaskRecord& t) {
    return TraitsOf(fw, t.role()).decides_job;
  });
  if (has_decider) {
    if (TraitsOf(fw, ended.role()).decides_job && ended.index() == 0 && done(ended)) {
      return absl::StrCat("the ", ended.role(), " completed");
    }
    return std::nullopt;
  }
  if (spec.success_policy() == v1::SUCCESS_CHIEF) {
    for (const auto& t : tasks) {
      if (TraitsOf(fw, t.role()).decides_success && t.index() == 0 && done(t)) {
        return absl::StrCat("the ", t.role(), " completed");
      }
    }
    return std::nullopt;
  }
  // Workers by role, the spec's kinds read once (not once per task).
  std::map<std::string_view, bool> worker_role;
  for (const v1::ReplicaSpec& rs : spec.replicas()) worker_role.emplace(rs.role(), TraitsOf(fw, rs).worker);
  auto is_worker = [&](const v1::TaskRecord& t) {
    auto it = worker_role.find(t.role());
    return it != worker_role.end() ? it->second : IsWorkerRole(fw, t.role());
  };
  bool any_worker = std::any_of(tasks.begin(), tasks.end(), is_worker);
  // An elastic job (docs/elastic.md) is done when the tasks of its size
  // are: those of its elastic roles not placed are not waited for.
  std::set<std::string_view> elastic;
  for (const v1::ReplicaSpec& rs : spec.replicas()) {
    if (rs.min_count() > 0) elastic.insert(rs.role());
  }
  for (const auto& t : tasks) {
    if (IsJobMasterRole(t.role())) continue;
    if (!elastic.empty() && t.node().empty() && t.state() == v1::TASK_PENDING && elastic.count(t.role())) continue;
    if ((!any_worker || is_worker(t)) && !done(t)) return std::nullopt;
  }
  return any_worker ? "all workers completed" : "all tasks completed";
}

}  // namespace trainyard::api
