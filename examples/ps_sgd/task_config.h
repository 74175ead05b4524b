// Who this task of the parameter-server example is, read from the
// environment Trainyard gives every task: TF_CONFIG (framework tensorflow)
// names the role, the index and the ps addresses; without it the TRAINYARD_*
// variables and the --ps flag do. Every problem names the variable at fault.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::examples {

using EnvMap = std::map<std::string, std::string>;

struct TaskConfig {
  // "ps", "worker" or "chief".
  std::string role;
  int index = 0;
  // host:port of every ps, in index order.
  std::vector<std::string> ps;
  // ps only: the port to serve on.
  int listen_port = 0;
  // Workers of the job (chief included) and this worker's rank among them:
  // the chief is rank 0, else worker i is rank i (i + 1 with a chief).
  int num_workers = 1;
  int rank = 0;
  std::string checkpoint_dir;
  // host:port of the job master; empty = run without barriers.
  std::string job_master;
  int restart_count = 0;
  std::string task_name;

  bool is_ps() const { return role == "ps"; }
  bool is_chief() const { return !is_ps() && rank == 0; }
};

// Reads the task's identity from `env`. `ps_flag` (comma-separated
// host:port list, may be empty) replaces the ps list of TF_CONFIG.
absl::StatusOr<TaskConfig> TaskConfigFromEnv(const EnvMap& env, const std::string& ps_flag);

// The process environment as a map.
EnvMap ProcessEnvironment();

}  // namespace trainyard::examples
