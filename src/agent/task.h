// The agent's view of one task: what to run (TaskLaunch), how its attempts
// end (TaskExit) and the status the supervisor reports (TaskStatus). Plain
// values; the server connection converts them to and from the wire types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/oci_bundle.h"
#include "agent/resource_limiter.h"
#include "core/resources/gpu_set.h"
#include "core/resources/port_ranges.h"

namespace trainyard::agent {

enum class RestartPolicy { kNever, kOnFailure, kAlways };

// Mirrors trainyard.v1.TaskState.
enum class TaskState { kPending, kLaunching, kRunning, kSucceeded, kFailed, kKilled, kRestarting };

// "RUNNING", "FAILED", ...
const char* TaskStateName(TaskState state);
// True for SUCCEEDED, FAILED and KILLED: nothing more will happen to the task.
bool IsFinal(TaskState state);

// Names one task on a node: JOB / ROLE / INDEX of the job with id JOB_ID.
// A job's name can be reused once it is deleted, its id never: the task's
// places on the node (logs, record, work dir) are named by the id (Place),
// so a new job of an old name never sees the old job's files. The name is
// for people (ToString). Job and role name directories under the data dir
// (the role always, the job when it has no id), so Validate rejects what
// could escape it.
struct TaskKey {
  std::string job;
  std::string role;
  int index = 0;
  // The server's id of the job. 0: none known (a launch from a test, or a
  // task recorded by an agent from before places were named by id); the
  // places are then named by the job's name, as they were.
  uint64_t job_id = 0;

  // "JOB/ROLE-INDEX", for people.
  std::string ToString() const;
  // The task's directory under logs/, tasks/ and work/: "job_ID/ROLE-INDEX"
  // ('_' is not allowed in job names, so it never meets a name's place), or
  // "JOB/ROLE-INDEX" when job_id is 0.
  std::string Place() const;
  // InvalidArgument naming the part when job or role is empty, ".", "..",
  // holds '/' or a NUL, or index is negative.
  absl::Status Validate() const;
  bool operator==(const TaskKey&) const = default;
  auto operator<=>(const TaskKey&) const = default;
};

// A local account a task runs as (task_user.h decides which).
struct TaskAccount {
  std::string name;  // "" for a uid with no account
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
  std::string home;  // "" when unknown
  bool operator==(const TaskAccount&) const = default;
};

// A task that runs in an OCI image (image_store.h, oci_bundle.h).
struct TaskImage {
  std::string ref;     // the role's `image:`
  std::string digest;  // its manifest's
  std::string rootfs;  // unpacked on this node
  std::vector<std::string> env;  // the image's, under the task's own
  std::vector<BundleMount> volumes;  // the role's `volumes:`
  bool operator==(const TaskImage&) const = default;
};

// Everything the supervisor needs to start and restart one task.
struct TaskLaunch {
  TaskKey key;
  uint64_t job_id = 0;  // the server's id of the job (names can be reused)
  int worker_id = 0;
  // The attempt to start first (0 for a new task; the server may resume a
  // task at a later attempt after it was rescheduled).
  int attempt = 0;
  // The job's cluster user, as the server records it; decides the local
  // account the task runs as (task_user.h).
  std::string user;
  // Set by the supervisor when tasks run as their users (the agent is
  // root): the account this task runs as. nullopt: the agent's own.
  std::optional<TaskAccount> run_as;
  std::vector<std::string> command;  // argv; command[0] is looked up in PATH
  std::map<std::string, std::string> env;  // extra env, e.g. TRAINYARD_JOB_MASTER
  std::string working_dir;           // empty: DATA/work/job_ID/ROLE-INDEX
  core::GpuSet gpus;
  int32_t gpu_milli = 0;      // a share of the one GPU in gpus; 0 = whole GPUs
  int64_t gpu_memory_mb = 0;  // that share's GPU memory; 0 = none asked
  // Set by the supervisor for a share under CUDA MPS (mps.h): where the
  // GPU's daemon is. Empty = no MPS.
  std::string mps_pipe_dir;
  std::string mps_log_dir;
  core::PortRanges ports;
  std::string checkpoint_dir;        // empty: DATA/checkpoints/job_ID/ROLE-INDEX
  // Set: the task runs in this image's container, through `oci_runtime`
  // (the command and working dir are the container's).
  std::optional<TaskImage> image;
  int64_t memory_limit_mb = 0;       // 0: no limit
  int64_t vcores_milli = 0;          // 0: no CPU limit
  RestartPolicy restart_policy = RestartPolicy::kNever;
  int max_restarts = 0;              // restarts allowed after the first attempt
  // Restarts allowed after OOM kills, counted apart from max_restarts (-1:
  // unlimited; restartPolicy does not apply, the server has weighed it).
  // nullopt: an OOM kill is a failure like any other.
  std::optional<int> oom_max_restarts;
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(30);
  absl::Duration kill_grace = absl::Seconds(10);  // SIGTERM → SIGKILL
};

// How one attempt ended. exit_code is -1 when the process was killed by a
// signal or when the code is unknown (an exit while the agent was down).
struct TaskExit {
  int exit_code = -1;
  int signal = 0;
  bool oom_killed = false;
  // Its process could not be started (a command not found, a directory
  // that cannot be entered): the attempt's class is LAUNCH_FAILED.
  bool launch_failed = false;
  std::string message;
};

// A status change of one task, as the listener receives it.
struct TaskStatus {
  TaskKey key;
  TaskState state = TaskState::kPending;
  int attempt = 0;
  int restarts = 0;  // restarts done so far
  int pid = 0;       // 0 when no process runs
  bool has_exit = false;
  TaskExit exit;     // valid when has_exit
  std::string message;
  int launch_attempt = -1;  // the server's attempt number of the launch (-1: unknown)
  // The launch was refused for a reason of this node (its files or
  // directories cannot be written), not of the task.
  bool node_fault = false;
  // The launch was refused because its GPUs are held by another task here
  // (v1::TaskStatus.gpus_held).
  bool gpus_held = false;
  uint64_t job_id = 0;  // TaskLaunch.job_id
  // The task's limits and what enforces each on this node.
  EnforcedLimits limits;
};

}  // namespace trainyard::agent
