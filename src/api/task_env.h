// The environment each task starts with: TRAINYARD_* for every task, and what
// its framework expects — TF_CONFIG (tensorflow), MASTER_ADDR / MASTER_PORT /
// RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / NODE_RANK (pytorch), an
// MPI hostfile (mpi) — plus a hosts file mapping each task's stable name
// JOB-ROLE-INDEX to the address of its node. The TRAINYARD_* names are
// common/task_env_names.h's (the one list every side of the launch reads).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/roles.h"
#include "common/task_env_names.h"
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

struct TaskEnv {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;  // name in the task dir -> content
};

// Stands for the agent's own `trainyard` binary in a launch's env values;
// the agent puts the path in (as it does ${TRAINYARD_TASK_DIR}).
inline constexpr char kTrainyardBinRef[] = "${TRAINYARD_BIN}";

// Open MPI's rsh agent for the tasks of a `framework: mpi` job
// (OMPI_MCA_plm_rsh_agent): `trainyard rsh`, so mpirun starts its daemons
// through Trainyard, never through ssh (docs/examples.md).
inline constexpr char kMpiRshAgentEnv[] = "OMPI_MCA_plm_rsh_agent";

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
