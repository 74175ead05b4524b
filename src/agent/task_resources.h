// What each running task uses of its node, sampled for the server
// (v1::TaskResourceReport, `trainyard top`, the job page's charts): CPU
// (thousandths of a core, averaged between samples), memory in use and its
// GPUs' load and memory. CPU and memory come from the attempt's cgroups
// (ResourceLimiter::Usage) where it has them, else from its process tree
// in /proc (the processes descended from its first one: CPU time of the
// living and of the children they reaped, resident memory summed). A GPU's
// load and memory are apportioned among the tasks holding it by their
// shares; simulated GPUs, which have no load, count busy for the share held.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "agent/gpu_discovery.h"
#include "agent/resource_limiter.h"
#include "agent/task.h"
#include "core/resources/gpu_set.h"

namespace trainyard::agent {

// One running attempt to sample (Supervisor::ResourceTargets).
struct ResourceTarget {
  TaskKey key;
  int attempt = 0;
  uint64_t job_id = 0;
  pid_t pid = 0;           // its first process
  std::string cgroup;      // the limiter's name of the attempt ("" none)
  absl::Time started = absl::InfinitePast();  // when the attempt started (InfinitePast: not known)
  int64_t memory_limit_mb = 0;  // as enforced on this node (0: none enforced)
  core::GpuSet gpus;
  int32_t gpu_milli = 0;   // a share of the one GPU in gpus; 0: whole GPUs
};

struct ResourceSample {
  TaskKey key;
  int attempt = 0;
  uint64_t job_id = 0;
  absl::Time time;
  int32_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int32_t gpu_busy_milli = 0;      // -1: not known
  int64_t gpu_memory_bytes = 0;
  int64_t memory_limit_bytes = 0;  // as enforced here; 0: none
  std::string source;              // "cgroup v2", "cgroup v1", "process tree"
};

// CPU time and resident memory of process trees, from one pass over
// PROC_ROOT/[0-9]*/stat.
class ProcessTable {
 public:
  static ProcessTable Read(const std::string& proc_root = "/proc");
  struct TreeUse {
    int64_t cpu_ns = 0;
    int64_t rss_bytes = 0;
    int processes = 0;  // 0: `root` is not running
  };
  // `root` and every process descended from it.
  TreeUse Tree(pid_t root) const;

 private:
  struct Proc {
    pid_t ppid = 0;
    int64_t cpu_ticks = 0;  // utime + stime + cutime + cstime
    int64_t rss_pages = 0;
  };
  std::map<pid_t, Proc> procs_;
  std::multimap<pid_t, pid_t> children_;
};

class TaskResourceSampler {
 public:
  explicit TaskResourceSampler(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  // Samples each target at `now`. CPU is the time used since the target's
  // previous sample over the time between them (its first: since it
  // started; 0 when that is not known, an attempt adopted from an earlier
  // agent, or its count went back: the next sample has it). `gpus` are the
  // node's GPUs as last read; `simulated` GPUs count busy for the share
  // held, a real GPU whose load is unknown makes the task's unknown (-1).
  // Not thread-safe.
  std::vector<ResourceSample> Sample(const std::vector<ResourceTarget>& targets, const ResourceLimiter& limiter,
                                     const std::vector<GpuInfo>& gpus, bool simulated, absl::Time now);

 private:
  const std::string proc_root_;
  struct Last {
    int64_t cpu_ns = 0;
    absl::Time at;
  };
  // By task and attempt; what is not sampled again is dropped.
  std::map<std::pair<TaskKey, int>, Last> last_;
};

}  // namespace trainyard::agent
