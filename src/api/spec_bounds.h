// What one job spec may ask of the server beyond its resources, and the
// least resources a task can run with: plain values, so the server's config
// holds them without pulling in the spec's wire types. Checked by
// api::CheckSpecBounds and api::ValidateJobSpec (job_spec.h).
#pragma once

#include <cstdint>

namespace trainyard::api {

// The least CPU a task can run with: the kernel refuses a CFS quota below
// 1 ms per period (cgroup cpu.max, cpu.cfs_quota_us) and the agent's period
// is 100 ms, so a task asking less than 10m could never be started (every
// launch failed with exit code 127).
inline constexpr int64_t kMinRunnableVcoresMilli = 10;
// The least memory a task can start in: below it a limited process is
// killed while the kernel loads it and its C library (a shell needs about
// 2 MiB resident), so it too would fail every launch.
inline constexpr int64_t kMinRunnableMemoryMb = 4;

// What one submission may cost the server, whatever its resources: the
// server's work and memory for a job grow with its tasks, its roles and the
// bytes its tasks are launched with (each task's launch order carries its
// role's command, args and environment). Set by the server's config (keys
// in docs/control-plane.md); the defaults fit a 10,000-GPU cluster.
struct SpecBounds {
  // 2,000: a job of 8-GPU tasks over all 10,000 GPUs is 1,250 tasks. Each
  // task's launch carries the job's hosts file (a line per task), so a job's
  // launches grow with tasks squared: ~140 MB at 2,000, ~3.5 GB at 10,000.
  int64_t max_tasks = 2000;                 // maxTasksPerJob
  int max_roles = 100;                      // maxRolesPerJob
  int64_t max_env_bytes = 128 << 10;        // maxEnvBytesPerRole: names and values
  int64_t max_command_bytes = 128 << 10;    // maxCommandBytesPerRole: command and args
  int64_t max_launch_bytes = 64 << 20;      // maxLaunchBytesPerJob: the above times count, summed
};

}  // namespace trainyard::api
