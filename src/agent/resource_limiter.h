// Memory, CPU and process-count limits for task processes: a cgroup per task
// attempt, through cgroup v2 (the unified hierarchy's root when the agent
// may write there, else a delegated subtree it owns: the parent of its own
// cgroup) or cgroup v1 (memory, cpu and pids controllers, each used where
// it is writable). Where no cgroup is writable, tasks run unconfined and
// the agent says so at start-up and in each task's status: no rlimit stands
// in for a memory limit (RLIMIT_AS counts reserved address space, which
// correct programs — job masters, JVMs, CUDA, Go — take far more of than
// they use, so it kills them, not the ones that use too much).
// The agent creates the cgroups and the task joins its own before it leaves
// root, so (running as another account) it can write into no cgroup's
// files: it cannot leave its cgroup.
// The limiter also tells, after an attempt ended, whether the kernel
// OOM-killed it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::agent {

enum class LimiterKind { kCgroupV2, kCgroupV1, kNone };
// "cgroup-v2", "cgroup-v1", "none".
const char* LimiterKindName(LimiterKind kind);

// What enforces each kind of task limit on this node: "cgroup v2",
// "cgroup v1" (cpu: "cgroup v2 quota", "cgroup v1 quota"), or "" when that
// limit is not enforced, for the reason in `why_not`.
struct Confinement {
  std::string memory;
  std::string cpu;
  std::string pids;
  std::string why_not;  // "" when all three are enforced
  std::string where;    // the directory (or directories) tasks' cgroups go under
};

// One line for the agent's start-up log: "memory: cgroup v1, cpu: cgroup v1
// quota, pids: not enforced (the pids controller is not writable)".
std::string DescribeConfinement(const Confinement& confinement);

struct TaskLimits {
  int64_t memory_limit_mb = 0;  // 0: none
  int64_t vcores_milli = 0;     // 0: none; 1000 = one core
  int64_t pids_max = 0;         // 0: none; the most processes and threads at once
};

// The limits asked for one task and what enforces each on this node (as in
// Confinement; "" = not enforced, or not asked when the value is 0). It
// travels to the server in the task's status and `describe` shows it.
struct EnforcedLimits {
  int64_t memory_mb = 0;
  std::string memory_by;
  int64_t vcores_milli = 0;
  std::string cpu_by;
  int64_t pids_max = 0;
  std::string pids_by;
  std::string why_not;  // set when a limit asked is not enforced
  bool operator==(const EnforcedLimits&) const = default;
};

// `limits` as `confinement` enforces them.
EnforcedLimits EnforcedFor(const Confinement& confinement, const TaskLimits& limits);

// What the child does between fork and exec to enter its limits. Only plain
// data, so the child touches no allocator.
struct PreparedLimits {
  std::vector<std::string> procs_files;  // write "0" into each (join the cgroup)
};

// What an attempt's cgroups have used (task_resources.h): CPU time in all
// and memory in use now (the working set: usage less the inactive file
// cache). Unset where no cgroup of that kind holds the attempt.
struct CgroupUsage {
  std::optional<int64_t> cpu_ns;
  std::optional<int64_t> memory_bytes;
  std::string source;  // "cgroup v2", "cgroup v1"; "" when neither is set
};

class ResourceLimiter {
 public:
  virtual ~ResourceLimiter() = default;
  virtual LimiterKind kind() const = 0;
  // What enforces each kind of limit; the same for every task.
  virtual const Confinement& confinement() const = 0;
  // Creates the limits of one attempt named `name` (unique per attempt,
  // [A-Za-z0-9_.-] only). An error names the file that could not be written.
  virtual absl::StatusOr<PreparedLimits> Prepare(const std::string& name,
                                                 const TaskLimits& limits) = 0;
  // True when the kernel OOM-killed a process of attempt `name` (or of a
  // cgroup below it, "NAME/CHILD": an OCI runtime's container). Call before
  // Release.
  virtual bool OomKilled(const std::string& name) = 0;
  // Kills what is left in the attempt's cgroup and removes it.
  virtual void Release(const std::string& name) = 0;
  // What attempt `name` uses now. Reads files only: safe beside the other
  // calls (a cgroup released meanwhile reads as unset).
  virtual CgroupUsage Usage(const std::string& /*name*/) const { return {}; }
  // The cgroup.procs files of attempt `name`'s cgroups that exist now: a
  // process that writes "0" into each joins the attempt (a command run in a
  // task, task_exec.h), counted against its limits and killed with it.
  virtual std::vector<std::string> JoinFiles(const std::string& /*name*/) const { return {}; }
};
using ResourceLimiterPtr = std::unique_ptr<ResourceLimiter>;

struct LimiterOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string proc_self_cgroup = "/proc/self/cgroup";
  // The agent's cgroups live in a directory of this name: under the unified
  // root (or the delegated subtree) for v2, under the agent's own cgroup of
  // each controller for v1.
  std::string parent_name = "trainyard";
  bool allow_v2 = true;
  bool allow_v1 = true;
};

// Returns the best limiter this machine allows: cgroup v2 (the root, else a
// delegated subtree), cgroup v1 (each controller where writable), else none;
// and logs one line saying which limits are enforced and how (a warning
// when some are not). Never fails.
ResourceLimiterPtr DetectResourceLimiter(const LimiterOptions& options = {});

// A limiter that enforces nothing (tasks run unconfined): what
// DetectResourceLimiter returns where no cgroup is writable. `why` says why,
// for the task's status.
ResourceLimiterPtr NewUnconfinedLimiter(std::string why = "no writable cgroup");

// Turns "job/role-0 attempt 2" material into a cgroup-safe name.
std::string CgroupSafeName(const std::string& text);

}  // namespace trainyard::agent
