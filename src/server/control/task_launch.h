// What a task is launched with, as its job's placement gives it: the job-wide
// part of the tasks' environment built once per batch of a job's launches
// (EnvContext), each task's environment and files (api::BuildTaskEnv, the
// launch contract's names in common/task_env_names.h), the files pushed to a
// running task when its job's placement changed, and the TaskSpec an agent
// is sent. The control state decides when to launch and where; this decides
// what. Functions of one job's record and the node table; part of the
// control state (sans-IO).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/task_env.h"
#include "proto/service.pb.h"
#include "server/control/node_table.h"

namespace trainyard::server {

struct JobRt;  // job_rt.h

// host:port of the job's master as placed now: its master task's node and
// first port, else the spec's (a master in the client), else "".
std::string JobMasterAddress(const JobRt& job, const NodeTable& nodes);

// Every placed task of one job as their environments see them, and what
// those share (api::JobWideEnv): built once, O(tasks), for a batch of
// launches or file pushes of that job, while its placement stays as it is.
struct EnvContext {
  api::TaskEnvInput in;
  api::JobWideEnv shared;
  std::vector<int> view_of;  // task -> its entry in in.tasks, -1 when not placed
};
// `checkpoint_root`: the server's, under which each job has its directory.
EnvContext EnvContextFor(const JobRt& job, const NodeTable& nodes, const std::string& checkpoint_root);

// The environment and files of task `task` as placed now (`ctx`: built for
// its job, placement unchanged since).
api::TaskEnv EnvFor(const JobRt& job, int task, EnvContext& ctx);

// The files of task `task` as placed now, for a push to its agent.
v1::TaskFiles TaskFilesFor(const JobRt& job, int task, EnvContext& ctx);

// What of the server goes into every launch.
struct LaunchSettings {
  int kill_grace_ms = 0;
  std::string_view server_address;  // TRAINYARD_SERVER of a task with the user's credential
};
// The launch of task `task` (of role `rs`) with its environment `env`: its
// command, env (the spec's, then the contract's), files, sealed secrets,
// image and volumes, and what is left of its restart budgets.
v1::TaskSpec TaskSpecFor(const JobRt& job, int task, const v1::ReplicaSpec& rs, api::TaskEnv env,
                         const LaunchSettings& settings);

}  // namespace trainyard::server
