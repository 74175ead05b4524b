// The role table (see roles.h).
#include "api/roles.h"

namespace trainyard::api {

RoleTraits TraitsOf(v1::Framework framework, std::string_view role) {
  RoleTraits t;
  t.job_master = role == kRoleJobMaster;
  t.worker = role != kRolePs && !t.job_master;
  t.decides_success = role == kRoleChief || role == kRoleMaster;
  t.in_tf_cluster = !t.job_master;
  t.torch_rank = t.worker;
  t.torch_rank0 = role == kRoleMaster;
  switch (framework) {
    case v1::FRAMEWORK_TENSORFLOW: t.default_port = !t.job_master; break;
    case v1::FRAMEWORK_PYTORCH: t.default_port = role == kRoleMaster || role == kRoleWorker; break;
    default: t.default_port = false; break;
  }
  return t;
}

bool IsWorkerRole(std::string_view role) { return TraitsOf(v1::FRAMEWORK_NONE, role).worker; }

bool IsJobMasterRole(std::string_view role) { return role == kRoleJobMaster; }

int WorkerCount(const v1::JobSpec& spec) {
  int n = 0;
  for (const auto& rs : spec.replicas()) {
    if (IsWorkerRole(rs.role())) n += rs.count();
  }
  return n;
}

}  // namespace trainyard::api
