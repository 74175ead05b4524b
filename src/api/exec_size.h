// Whether a role's tasks can be started at all: execve refuses (E2BIG) an
// argument list and environment larger than ARG_MAX in all, or any one
// string longer than MAX_ARG_STRLEN. Checked at submit, so a user hears of
// it then, with the field, instead of from every task failing at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/trainyard.pb.h"

namespace trainyard::api {

struct ExecLimits {
  // Bytes of argument and environment strings, each with its NUL and its
  // pointer, that execve takes: sysconf(_SC_ARG_MAX). 0: not checked.
  int64_t arg_max = 0;
  // Bytes of one string, NUL included: Linux's MAX_ARG_STRLEN (32 pages).
  int64_t max_string = 32 * 4096;
  // Kept back for what the agent adds when it starts the task: its own
  // environment, which tasks inherit, and the paths it fills in.
  int64_t reserve = 32 << 10;
};

struct ExecJob {
  std::string name;            // the job's name, as its tasks will see it
  std::string checkpoint_dir;  // TRAINYARD_CHECKPOINT_DIR
  bool job_master = false;     // whether TRAINYARD_JOB_MASTER is set
};

// A job within these bounds is checked by its own strings alone: what
// Trainyard adds to any of its tasks' environments stays under `env_bytes`
// (exec_size_test builds the largest such job, for every framework).
struct SmallJob {
  int tasks = 16;
  int64_t ports = 64;          // per role: port_count plus the fixed ports
  size_t name_bytes = 253;     // the job's name and each role's
  size_t path_bytes = 4096;    // the checkpoint directory
  int64_t env_bytes = 256 << 10;
};
inline constexpr SmallJob kSmallJob;

// The most bytes (execve's count) of the variables Trainyard sets for any
// one task of `spec`, for the stand-in placement CheckExecSize uses.
int64_t TrainyardEnvBytes(const v1::JobSpec& spec, const ExecJob& job);

// For each role of `spec` but the job master's, the problems of the command
// (with args) and environment its tasks would start with: the spec's own
// variables and those Trainyard sets (TF_CONFIG grows with the job), the
// latter estimated for a placement on nodes with the longest names (63)
// and IPv4 addresses (15) and five-digit ports. Each problem names the
// field: "replicas.worker.env.BIG: 200001 bytes is above the 131072 bytes
// the kernel takes in one variable". Empty when `limits.arg_max` is 0 or
// everything fits.
std::vector<std::string> CheckExecSize(const v1::JobSpec& spec, const ExecJob& job, const ExecLimits& limits);

}  // namespace trainyard::api
