// Memory, CPU and process-count limits for task processes: a cgroup per task
// attempt through cgroup v2 (unified hierarchy) when the agent can create
// cgroups there, else cgroup v1 (memory, cpu and pids controllers), else
// rlimits with a warning once. The agent creates the cgroups and the task
// joins its own before it leaves root, so (running as another account) it
// can write into no cgroup's files: it cannot leave its cgroup.
// The limiter also tells, after an attempt ended, whether the kernel
// OOM-killed it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::agent {

enum class LimiterKind { kCgroupV2, kCgroupV1, kRlimit };
// "cgroup-v2", "cgroup-v1", "rlimit".
const char* LimiterKindName(LimiterKind kind);

struct TaskLimits {
  int64_t memory_limit_mb = 0;  // 0: none
  int64_t vcores_milli = 0;     // 0: none; 1000 = one core
  int64_t pids_max = 0;         // 0: none; the most processes and threads at once
};

// What the child does between fork and exec to enter its limits. Only plain
// data, so the child touches no allocator.
struct PreparedLimits {
  std::vector<std::string> procs_files;  // write "0" into each (join the cgroup)
  uint64_t address_space_bytes = 0;      // RLIMIT_AS when > 0 (rlimit fallback)
};

class ResourceLimiter {
 public:
  virtual ~ResourceLimiter() = default;
  virtual LimiterKind kind() const = 0;
  // Creates the limits of one attempt named `name` (unique per attempt,
  // [A-Za-z0-9_.-] only). An error names the file that could not be written.
  virtual absl::StatusOr<PreparedLimits> Prepare(const std::string& name,
                                                 const TaskLimits& limits) = 0;
  // True when the kernel OOM-killed a process of attempt `name`. Call before
  // Release.
  virtual bool OomKilled(const std::string& name) = 0;
  // Kills what is left in the attempt's cgroup and removes it.
  virtual void Release(const std::string& name) = 0;
};
using ResourceLimiterPtr = std::unique_ptr<ResourceLimiter>;

struct LimiterOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string proc_self_cgroup = "/proc/self/cgroup";
  // The agent's cgroups live in a directory of this name: under the unified
  // root for v2, under the agent's own cgroup for v1.
  std::string parent_name = "trainyard";
  bool allow_v2 = true;
  bool allow_v1 = true;
};

// Returns the best limiter this machine allows (v2, v1, rlimit), logging
// which and, for rlimit, the warning that limits are weaker. Never fails:
// rlimits are always available.
ResourceLimiterPtr DetectResourceLimiter(const LimiterOptions& options = {});

// The rlimit fallback on its own (memory as RLIMIT_AS; CPU not enforced).
ResourceLimiterPtr NewRlimitLimiter();

// Turns "job/role-0 attempt 2" material into a cgroup-safe name.
std::string CgroupSafeName(const std::string& text);

}  // namespace trainyard::agent
