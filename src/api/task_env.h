// The environment each task starts with: TRAINYARD_* for every task, and what
// its framework expects — TF_CONFIG (tensorflow), MASTER_ADDR / MASTER_PORT /
// RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / NODE_RANK (pytorch), an
// MPI hostfile (mpi) — plus a hosts file mapping each task's stable name
// JOB-ROLE-INDEX to the address of its node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/roles.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// Where one task of the job runs now.
struct PlacedTaskView {
  std::string role;
  int index = 0;
  int worker_id = 0;
  std::string node;
  std::string address;  // the node's address
  uint64_t gpu_mask = 0;
  std::vector<uint32_t> ports;
  int32_t gpu_milli = 0;      // a share of the one GPU in gpu_mask
  int64_t gpu_memory_mb = 0;  // GPU memory of that share; 0 = none asked
};

struct TaskEnvInput {
  const v1::JobSpec* spec = nullptr;
  std::string job;                     // the job's name
  std::vector<PlacedTaskView> tasks;   // every task of the job, placed
  std::string job_master;              // host:port, "" when none
  std::string checkpoint_dir;          // the job's checkpoint directory
  int attempt = 0;                     // see SetAttemptEnv
  std::string array_job;               // an array's element: the array's name ("" when none)
  int array_index = 0;                 // and its index
  // The step its workers saved at the job's last coordinated checkpoint
  // (TRAINYARD_RESUME_STEP); -1 when there was none.
  int64_t resume_step = -1;
  // An elastic job (docs/elastic.md): its membership epoch
  // (TRAINYARD_MEMBERSHIP_EPOCH; 0 = not elastic, not set) and its workers
  // placed at this size (TRAINYARD_NUM_WORKERS; -1 = the spec's count).
  int membership_epoch = 0;
  int num_workers = -1;
};

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

struct TaskEnv {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;  // name in the task dir -> content
};

// TRAINYARD_USER: the job's user as the server records it. The agent runs
// the task as the local account this user maps to, so it reads the user
// from the launch's env; the server sets it after the spec's own env, so a
// spec cannot choose it.
inline constexpr char kTaskUserEnv[] = "TRAINYARD_USER";

// The variable that holds the job's credential (docs/security.md), in the
// job master task's environment only. The server adds it to the launch order
// as it leaves (server/agent_streams.cc), never to the stored task, so it is
// not built here; the job master reads it (jobmaster/server_job_terminator.cc).
inline constexpr char kJobTokenEnv[] = "TRAINYARD_JOB_TOKEN";
// The job's secret, given at launch to the job master and to every task
// given its address (kJobMasterEnv): what its workers show the
// job master (STARTING, ATTACH). Not the credential above:
// a worker holding it cannot speak to the server for the job.
inline constexpr char kJobSecretEnv[] = "TRAINYARD_JOB_SECRET";
// The job master's address, set for the tasks of a job that has one.
inline constexpr char kJobMasterEnv[] = "TRAINYARD_JOB_MASTER";

// A role's `userCredential: true`: its tasks get the server's address and a
// credential of the job's user, so the CLI in a task acts as that user
// (the names the CLI reads, src/cli/client.cc). The server sets the address
// in the launch order and adds the credential as the order leaves
// (server/agent_streams.cc), never to the stored task; the credential is
// valid while the job has not ended, and never an admin's.
inline constexpr char kServerEnv[] = "TRAINYARD_SERVER";
inline constexpr char kTokenEnv[] = "TRAINYARD_TOKEN";

// The cluster CA's certificate file, when the server serves TLS: what the
// CLI and a job master verify the server with (docs/security.md). An agent
// with --ca gives its path to every task it starts.
inline constexpr char kCaFileEnv[] = "TRAINYARD_CA_FILE";

// Stands for the agent's own `trainyard` binary in a launch's env values;
// the agent puts the path in (as it does ${TRAINYARD_TASK_DIR}).
inline constexpr char kTrainyardBinRef[] = "${TRAINYARD_BIN}";

// Open MPI's rsh agent for the tasks of a `framework: mpi` job
// (OMPI_MCA_plm_rsh_agent): `trainyard rsh`, so mpirun starts its daemons
// through Trainyard, never through ssh (docs/examples.md).
inline constexpr char kMpiRshAgentEnv[] = "OMPI_MCA_plm_rsh_agent";
// The agent's `trainyard` binary (kTrainyardBinRef), for an MPI job's
// worker command: `exec "$TRAINYARD_BIN" rsh --serve`.
inline constexpr char kTrainyardBinEnv[] = "TRAINYARD_BIN";
// The file of the job's rank hosts, "ADDRESS PORT" per node of its MPI
// workers: where `trainyard rsh HOST` finds HOST's.
inline constexpr char kMpiRankHostsEnv[] = "TRAINYARD_MPI_RANK_HOSTS";

// What is the same for every task of one placed job: its hosts file, the
// cluster of TF_CONFIG, the MPI hostfile, the PyTorch ranks. Built once per
// job (linear in its tasks) and shared by each task's BuildTaskEnv, so the
// environments of a job's T tasks cost O(T) work plus what they hold, not
// O(T^2) (10,000 tasks took seconds of the server's lock).
struct JobWideEnv {
  std::string hosts;
  std::string tf_cluster;    // the JSON object under TF_CONFIG's "cluster"
  std::string mpi_hostfile;
  std::string mpi_rank_hosts;  // "ADDRESS PORT" of the first MPI worker on each node
  struct TorchRank {
    int rank = 0, local_rank = 0, local_world = 0, node_rank = 0;
  };
  std::map<std::pair<std::string, int>, TorchRank> torch;  // by (role, index)
  std::string torch_master_addr, torch_master_port;
  int torch_world = 0;
};
JobWideEnv BuildJobWideEnv(const TaskEnvInput& input);

// Builds the environment of `self` (one of input.tasks); `job` is
// BuildJobWideEnv(input).
TaskEnv BuildTaskEnv(const TaskEnvInput& input, const JobWideEnv& job, const PlacedTaskView& self);
// The same for one task alone (it builds the job-wide part itself).
TaskEnv BuildTaskEnv(const TaskEnvInput& input, const PlacedTaskView& self);

// The job's checkpoint directory under the server's checkpoint root:
// ROOT/JOB.ID. The id keeps it the job's own: a later job that reuses the
// name of a deleted one (with another id) starts empty instead of resuming
// from the old job's checkpoints; the job's own restarts, moves and
// preemptions keep its id and so its directory.
std::string JobCheckpointDir(const std::string& root, const std::string& job, uint64_t job_id);

// The ordered list of ports as "p1,p2".
std::string PortsList(const std::vector<uint32_t>& ports);

// The variables that change with each start of a task: TRAINYARD_ATTEMPT
// and TRAINYARD_RESTART_COUNT, both the number of times this task was
// started before this start (restarts by its agent after a failure, moves
// off a lost node, preemption and relaunches all count), so a program that
// resumes from its checkpoint when TRAINYARD_RESTART_COUNT > 0 does so after
// each of them. The server's launch carries the values of its first start;
// the agent sets them again for every start it makes (`attempt` is then the
// launch's attempt plus the agent's restarts of it).
void SetAttemptEnv(int attempt, std::map<std::string, std::string>* env);

// The variables that say which task this is and what it holds on its node:
// TRAINYARD_JOB, _ROLE, _INDEX, _WORKER_ID, _PORTS, _CHECKPOINT_DIR and
// CUDA_VISIBLE_DEVICES; for a share of one GPU also TRAINYARD_GPU_SHARE (its
// thousandths, "250") and TRAINYARD_GPU_MEMORY_MB (when asked), which a
// task without a share never has. The server sets them in the launch (BuildTaskEnv);
// the agent sets them again at each start from the launch it holds (its own
// checkpoint directory when the launch names none), with the same names and
// formats because both call this.
struct TaskSelf {
  std::string job;
  std::string role;
  int index = 0;
  int worker_id = 0;
  std::vector<uint32_t> ports;
  std::string checkpoint_dir;
  std::vector<int> gpus;  // indices on the node
  int32_t gpu_milli = 0;      // a share of gpus[0]; 0 = whole GPUs
  int64_t gpu_memory_mb = 0;
};
void SetTaskSelfEnv(const TaskSelf& self, std::map<std::string, std::string>* env);

}  // namespace trainyard::api
