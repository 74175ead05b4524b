// Role and framework semantics in one table: which roles are workers, which
// role decides success under the chief policy, which get a port by default,
// and how each framework orders and groups tasks. Every rule about a role
// name lives here; the server, the task environment, the spec validation
// and the job master's worker count call it.
#pragma once

#include <string>
#include <string_view>

#include "proto/trainyard.pb.h"

namespace trainyard::api {

inline constexpr std::string_view kRoleWorker = "worker";
inline constexpr std::string_view kRolePs = "ps";
inline constexpr std::string_view kRoleChief = "chief";
inline constexpr std::string_view kRoleMaster = "master";  // PyTorch rank 0
inline constexpr std::string_view kRoleLauncher = "launcher";  // MPI
inline constexpr std::string_view kRoleEvaluator = "evaluator";
// The job master task the server adds to a job with workers.
inline constexpr std::string_view kRoleJobMaster = "jobmaster";

// What a role means to the server and to the task environment.
struct RoleTraits {
  // Registers with the job master and, under the AllWorkers policy, must
  // complete for the job to succeed: every role but "ps" and "jobmaster".
  bool worker = false;
  // Under the chief policy, its index 0 completing ends the job: "chief"
  // (TensorFlow) and "master" (PyTorch).
  bool decides_success = false;
  // Given one port when the spec asks for none (frameworks address tasks by
  // port): every TensorFlow role; PyTorch "master" and "worker".
  bool default_port = false;
  // Listed in TF_CONFIG's cluster (TensorFlow): every role but the job master.
  bool in_tf_cluster = false;
  // A PyTorch rank (RANK / WORLD_SIZE): every role but "ps" and the job
  // master; "master" is rank 0.
  bool torch_rank = false;
  bool torch_rank0 = false;
  // The server's own job master task.
  bool job_master = false;
};

// The traits of `role` in a job of `framework`.
RoleTraits TraitsOf(v1::Framework framework, std::string_view role);

// Shorthands over TraitsOf for rules that do not depend on the framework.
bool IsWorkerRole(std::string_view role);
bool IsJobMasterRole(std::string_view role);

// Number of tasks that register with the job master (worker roles).
int WorkerCount(const v1::JobSpec& spec);

}  // namespace trainyard::api
