// Role and framework semantics in one table: which roles are workers, which
// role decides the job's end, which get a port by default, which talk to the
// job master, and how each framework orders and groups tasks. Every rule
// about a role name lives here; the server, the task environment, the spec
// validation and the job master's worker count call it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "google/protobuf/repeated_ptr_field.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

inline constexpr std::string_view kRoleWorker = "worker";
inline constexpr std::string_view kRolePs = "ps";
inline constexpr std::string_view kRoleChief = "chief";
inline constexpr std::string_view kRoleMaster = "master";  // PyTorch rank 0
inline constexpr std::string_view kRoleLauncher = "launcher";  // MPI
inline constexpr std::string_view kRoleEvaluator = "evaluator";
// The job master task the server adds to a job that can use one.
inline constexpr std::string_view kRoleJobMaster = "jobmaster";

// What a role means to the server and to the task environment.
struct RoleTraits {
  // Counted in TRAINYARD_NUM_WORKERS and the job master's worker count (ids
  // 0..N-1) and, under the AllWorkers policy, must complete for the job to
  // succeed: every role but "ps", the job master, the MPI "launcher" (not a
  // rank: it starts the ranks on the workers) and the TensorFlow
  // "evaluator" (it watches checkpoints beside the training, which does not
  // wait for it; it is stopped with the parameter servers, as in Kubeflow).
  bool worker = false;
  // Under the chief policy, its index 0 completing ends the job: "chief"
  // (TensorFlow) and "master" (PyTorch).
  bool decides_success = false;
  // Its index 0 ending ends the job whatever the success policy: it
  // succeeds, the job succeeds (the other tasks are stopped); it fails, the
  // job fails. The MPI "launcher", as in Kubeflow's MPIJob, whose workers
  // run until they are stopped.
  bool decides_job = false;
  // Given one port when the spec asks for none (frameworks address tasks by
  // port): every TensorFlow role; PyTorch "master" and "worker".
  bool default_port = false;
  // Listed in TF_CONFIG's cluster (TensorFlow): every role but the job
  // master and "evaluator" (TensorFlow's multi-worker strategies refuse a
  // cluster that lists it; the evaluator's own TF_CONFIG names it as its
  // task type).
  bool in_tf_cluster = false;
  // A PyTorch rank (RANK / WORLD_SIZE): every role but "ps" and the job
  // master; "master" is rank 0.
  bool torch_rank = false;
  bool torch_rank0 = false;
  // A host of MPI ranks, listed in the hostfile with one slot per task: the
  // MPI workers.
  bool mpi_host = false;
  // Registers with the job master (discovery, barriers, pings) when the job
  // has one: the workers of framework none (the `trainyard worker` commands
  // and the worker library are their only rendezvous) and of TensorFlow
  // (parameter-server training lines its workers up at the master's
  // barriers). PyTorch ranks meet at MASTER_ADDR and MPI ranks are started
  // by mpirun, so neither talks to it.
  bool uses_job_master = false;
  // The server's own job master task.
  bool job_master = false;
  // A service role (`kind: service`, docs/services.md): none of the above
  // but default_port; its first port is reachable through the server's
  // proxy.
  bool service = false;
};

// The traits of a task role named `role` in a job of `framework`, by its
// name alone (a role of kind task).
RoleTraits TraitsOf(v1::Framework framework, std::string_view role);
// The traits of role `rs` in a job of `framework`: a service
// (`kind: service`) is none of the framework's: no worker, rank, cluster
// member or decider, and it gets a port when it asks none.
RoleTraits TraitsOf(v1::Framework framework, const v1::ReplicaSpec& rs);
// The traits of the role named `role` of `spec` (its kind from the spec; a
// role the spec does not name is taken by its name).
RoleTraits TraitsOf(const v1::JobSpec& spec, std::string_view role);

// Role names that mean something to a framework (or to the server): a
// service role may not take one (a service named "worker" would read as a
// worker to a person and to the frameworks' own tools).
bool IsFrameworkRoleName(std::string_view role);

// Shorthands over TraitsOf.
bool IsWorkerRole(v1::Framework framework, std::string_view role);
bool IsJobMasterRole(std::string_view role);

// Whether a job of `spec` has a job master: the server's own master task (a
// role kRoleJobMaster, which the server adds at submission) or one in the
// submitting client (job_master_address). Such a job can be asked to
// checkpoint before it is stopped, so the scheduler prefers it as a victim.
bool HasJobMaster(const v1::JobSpec& spec);

// Number of tasks that count as workers (see RoleTraits::worker).
int WorkerCount(const v1::JobSpec& spec);

// Whether a role of the job says minCount (docs/elastic.md).
bool IsElastic(const v1::JobSpec& spec);

// Whether a job of `spec` can use a job master: one of its roles, with
// count > 0, talks to it (RoleTraits::uses_job_master; with `jobmaster: true`
// every worker role does, with `jobmaster: false` none).
bool UsesJobMaster(const v1::JobSpec& spec);

// The tasks of a job as the job's verdict sees them (the job master task
// among them is ignored).
using TaskRecords = google::protobuf::RepeatedPtrField<v1::TaskRecord>;

// The number of the job's own tasks: all but its job master, which users
// see apart (it is the server's, not theirs).
int JobTaskCount(const TaskRecords& tasks);

// Whether the job of `spec` has succeeded now that `ended` (one of `tasks`,
// state TASK_SUCCEEDED) has: the message of its end ("all workers
// completed", "the launcher completed", ...), or nullopt while it goes on.
// The rule: a role that decides the job (the MPI launcher), else under the
// chief policy the chief (or master) 0, else every worker (every task when
// there is no worker role).
std::optional<std::string> SuccessAfter(const v1::JobSpec& spec, const TaskRecords& tasks,
                                        const v1::TaskRecord& ended);

}  // namespace trainyard::api
