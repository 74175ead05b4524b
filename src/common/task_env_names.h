// The names of the TRAINYARD_* variables a task starts with: one list for
// every side of the launch contract. The server builds them
// (api/task_env.h), the agent adds its own (the task's dir) and reads some
// back, and the worker library (jobmaster/client) and the job master read
// them; each names them here, never as a string of its own. docs/tasks.md
// says what each holds.
#pragma once

namespace trainyard {

// Who the task is: its job, role, index, the job's worker id and its
// stable name JOB-ROLE-INDEX.
inline constexpr char kJobEnv[] = "TRAINYARD_JOB";
inline constexpr char kRoleEnv[] = "TRAINYARD_ROLE";
inline constexpr char kIndexEnv[] = "TRAINYARD_INDEX";
inline constexpr char kWorkerIdEnv[] = "TRAINYARD_WORKER_ID";
inline constexpr char kTaskNameEnv[] = "TRAINYARD_TASK_NAME";
inline constexpr char kNumWorkersEnv[] = "TRAINYARD_NUM_WORKERS";
// Its attempt, and the restarts before it (the same number).
inline constexpr char kAttemptEnv[] = "TRAINYARD_ATTEMPT";
inline constexpr char kRestartCountEnv[] = "TRAINYARD_RESTART_COUNT";
// Where it runs: the node, the node's address, its ports (comma-separated),
// its share of one GPU (thousandths) and that share's GPU memory (MB).
inline constexpr char kNodeEnv[] = "TRAINYARD_NODE";
inline constexpr char kNodeAddressEnv[] = "TRAINYARD_NODE_ADDRESS";
inline constexpr char kPortsEnv[] = "TRAINYARD_PORTS";
inline constexpr char kGpuShareEnv[] = "TRAINYARD_GPU_SHARE";
inline constexpr char kGpuMemoryMbEnv[] = "TRAINYARD_GPU_MEMORY_MB";
// Its files: the task's own dir (the agent's), the job's checkpoint dir, the
// hosts file, the MPI hostfile and the file with the job master's address.
inline constexpr char kTaskDirEnv[] = "TRAINYARD_TASK_DIR";
inline constexpr char kCheckpointDirEnv[] = "TRAINYARD_CHECKPOINT_DIR";
inline constexpr char kHostsFileEnv[] = "TRAINYARD_HOSTS_FILE";
inline constexpr char kMpiHostfileEnv[] = "TRAINYARD_MPI_HOSTFILE";
inline constexpr char kJobMasterFileEnv[] = "TRAINYARD_JOB_MASTER_FILE";
// An elastic job's membership epoch: one more at each new size.
inline constexpr char kMembershipEpochEnv[] = "TRAINYARD_MEMBERSHIP_EPOCH";
// Where a task resumes: the step its job's workers last saved together when
// the job was ordered to checkpoint (a preemption, a time limit).
inline constexpr char kResumeStepEnv[] = "TRAINYARD_RESUME_STEP";
// An element of a job array (`trainyard submit --array`) gets the array's
// name and its index: TRAINYARD_ARRAY_JOB=train, TRAINYARD_ARRAY_INDEX=3.
inline constexpr char kArrayJobEnv[] = "TRAINYARD_ARRAY_JOB";
inline constexpr char kArrayIndexEnv[] = "TRAINYARD_ARRAY_INDEX";
// A service task's port (its first), the one the server's proxy reaches
// (docs/services.md): the service listens there on the node's address.
inline constexpr char kServicePortEnv[] = "TRAINYARD_SERVICE_PORT";
// The job's user as the server records it. The agent runs the task as the
// local account this user maps to, so it reads the user from the launch's
// env; the server sets it after the spec's own env, so a spec cannot
// choose it.
inline constexpr char kTaskUserEnv[] = "TRAINYARD_USER";
// The job's credential (docs/security.md), in the job master task's
// environment only. The server adds it to the launch order as it leaves
// (server/agent_streams.cc), never to the stored task; the job master reads
// it (jobmaster/server_job_terminator.cc).
inline constexpr char kJobTokenEnv[] = "TRAINYARD_JOB_TOKEN";
// The job's secret, given at launch to the job master and to every task
// given its address (kJobMasterEnv): what its workers show the job master
// (STARTING, ATTACH). Not the credential above: a worker holding it cannot
// speak to the server for the job.
inline constexpr char kJobSecretEnv[] = "TRAINYARD_JOB_SECRET";
// The job master's address, set for the tasks of a job that has one.
inline constexpr char kJobMasterEnv[] = "TRAINYARD_JOB_MASTER";
// A role's `userCredential: true`: its tasks get the server's address (or
// every server's) and a credential of the job's user, so the CLI in a task
// acts as that user (the names the CLI reads, src/cli/client.cc). The server
// sets the address in the launch order and adds the credential as the order
// leaves (server/agent_streams.cc), never to the stored task.
inline constexpr char kServerEnv[] = "TRAINYARD_SERVER";
inline constexpr char kTokenEnv[] = "TRAINYARD_TOKEN";
// The cluster CA's certificate file, when the server serves TLS: what the
// CLI and a job master verify the server with. An agent with --ca gives its
// path to every task it starts.
inline constexpr char kCaFileEnv[] = "TRAINYARD_CA_FILE";
// The agent's own `trainyard` binary, for an MPI job's worker command:
// `exec "$TRAINYARD_BIN" rsh --serve`.
inline constexpr char kTrainyardBinEnv[] = "TRAINYARD_BIN";
// The file of an MPI job's rank hosts, "ADDRESS PORT" per node of its
// workers: where `trainyard rsh HOST` finds HOST's.
inline constexpr char kMpiRankHostsEnv[] = "TRAINYARD_MPI_RANK_HOSTS";

// Every name above: what a launch may carry under TRAINYARD_ (a test holds
// the server's launches to it).
inline constexpr const char* kTaskEnvNames[] = {
    kJobEnv,          kRoleEnv,          kIndexEnv,           kWorkerIdEnv,     kTaskNameEnv,
    kNumWorkersEnv,   kAttemptEnv,       kRestartCountEnv,    kNodeEnv,         kNodeAddressEnv,
    kPortsEnv,        kGpuShareEnv,      kGpuMemoryMbEnv,     kTaskDirEnv,      kCheckpointDirEnv,
    kHostsFileEnv,    kMpiHostfileEnv,   kJobMasterFileEnv,   kMembershipEpochEnv, kResumeStepEnv,
    kArrayJobEnv,     kArrayIndexEnv,    kServicePortEnv,     kTaskUserEnv,     kJobTokenEnv,
    kJobSecretEnv,    kJobMasterEnv,     kServerEnv,          kTokenEnv,        kCaFileEnv,
    kTrainyardBinEnv, kMpiRankHostsEnv,
};

}  // namespace trainyard
