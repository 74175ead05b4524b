// AgentCore: everything the node agent does on its node, behind one facade
// that the server connection drives. It discovers the node (GPUs, topology,
// memory, cores, serving ports) for registration, builds heartbeat snapshots
// (GPU memory use, ownerless GPUs, ports in use, task states), launches and
// kills tasks through the supervisor, and gives access to task logs. Status
// changes leave through the TaskListener given at Start. No networking here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/gpu_discovery.h"
#include "agent/gpu_health.h"
#include "agent/image_store.h"
#include "agent/mps.h"
#include "agent/resource_limiter.h"
#include "agent/supervisor.h"
#include "agent/task.h"
#include "agent/task_user.h"
#include "common/clock.h"
#include "core/resources/gpu_set.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/port_ranges.h"

namespace trainyard::agent {

struct AgentConfig {
  std::string node_name;  // "" = the host name
  std::string address;    // "" = the node name
  std::string rack;
  std::string data_center;
  std::map<std::string, std::string> labels;
  std::string data_dir;   // required; made absolute at Start
  const Clock* clock = nullptr;  // required; outlives the agent
  GpuDiscoveryOptions gpu;
  OwnerlessGpuOptions ownerless;      // gpu_exclude_ownerless_gpu.*
  std::string port_range;             // "" = the server decides (docs/resources.md, Ports)
  int64_t memory_mb = 0;              // 0 = MemTotal from /proc/meminfo
  int64_t vcores_milli = 0;           // 0 = 1000 per CPU this process may run on
  std::string proc_root = "/proc";    // tests point this at recorded files
  ResourceLimiter* limiter = nullptr; // nullptr = DetectResourceLimiter() under cgroup_root
  std::string cgroup_root = "/sys/fs/cgroup";  // --cgroup-root
  bool adopt_tasks = true;            // re-adopt tasks of an earlier agent at Start
  // The most bytes kept of each attempt's logs (--log-max-attempt-bytes;
  // the newest part stays). 0: no cap.
  int64_t log_max_attempt_bytes = 100ll << 20;
  // CUDA MPS per shared GPU (--mps off|auto|on, --mps-control; mps.h and
  // docs/gpu-sharing.md): off by default; auto only for real GPUs.
  std::string mps = "off";
  std::string mps_control;  // "" = nvidia-cuda-mps-control in PATH
  // Who tasks run as (--task-user-map, --allow-root-tasks) and where they
  // may work (--task-workdir-roots): task_user.h, docs/agent.md.
  TaskUserOptions task_users;
  int64_t task_pids_max = 4096;  // --task-pids-max; 0: no limit
  // How long a finished task's work dir stays (--task-dir-retention;
  // SupervisorOptions::task_dir_retention): 0 at once, infinite never.
  absl::Duration task_dir_retention = absl::Hours(1);
  // The OCI runtime for tasks with an image (docs/images.md): "" = runc,
  // else crun, from PATH and the system's sbin and bin dirs.
  std::string oci_runtime;
  // Registries images are pulled from without TLS checks (HOST[:PORT]).
  std::vector<std::string> insecure_registries;
  // Where the GPUs' Xid events are read (--gpu-events; gpu_health.h): ""
  // = the kernel's log (/dev/kmsg) for real GPUs, DATA_DIR/gpu-events (a
  // file the agent makes, 0600) for simulated ones; "none" = not read.
  std::string gpu_events;
};

// What the agent registers with (mirrors trainyard.v1.NodeInfo).
struct NodeInfo {
  std::string name;
  std::string address;
  std::string rack;
  std::string data_center;
  std::map<std::string, std::string> labels;
  int64_t memory_mb = 0;
  int64_t vcores_milli = 0;
  std::vector<GpuInfo> gpus;
  core::GpuTopology topology;
  core::PortRanges port_range;   // the ports to serve as configured; empty = the server's default
  core::PortRanges ephemeral_ports;  // the kernel's ip_local_port_range (empty when unreadable)
  core::GpuSet excluded_gpus;    // busy with processes Trainyard did not start
  std::string gpu_source;        // "nvml", "nvidia-smi", "simulated"
  std::string mps_control;       // the MPS control program in use; "" = no MPS
  LimiterKind limiter = LimiterKind::kNone;
  std::string oci_runtime;       // for tasks with an image; "" = none
};

// One heartbeat's worth of node state.
struct HeartbeatSnapshot {
  std::vector<GpuInfo> gpus;         // memory use now
  core::GpuSet gpus_in_use;          // held by our tasks that have not ended
  core::GpuSet excluded_gpus;        // ownerless busy GPUs now
  core::PortRanges ports_in_use;     // every local port in use on the node
  std::vector<TaskStatus> tasks;
  std::vector<v1::GpuFault> gpu_faults;  // GpuHealth::Faults after this look
};

class AgentCore {
 public:
  // Discovers the node, starts the supervisor and (unless disabled) re-adopts
  // the tasks an earlier agent left running. `discovery` overrides the
  // choice from config.gpu (tests pass simulated GPUs they can mark busy).
  // Errors name the config field (data_dir, port_range, gpu options).
  static absl::StatusOr<std::unique_ptr<AgentCore>> Start(const AgentConfig& config,
                                                          TaskListener* listener,
                                                          GpuDiscoveryPtr discovery = nullptr);

  const NodeInfo& node_info() const { return node_; }
  // Statuses of the tasks re-adopted at Start.
  const std::vector<TaskStatus>& adopted() const { return adopted_; }

  // The ports in use on the node now (for registration); an error when
  // /proc/net cannot be read.
  absl::StatusOr<core::PortRanges> PortsInUse() const;
  // Reads GPU memory use, ports in use and task states now. An error when
  // GPU discovery or /proc/net reading fails, with the reason.
  absl::StatusOr<HeartbeatSnapshot> Heartbeat();

  // The GPU faults seen since the agent started (registration sends them).
  std::vector<v1::GpuFault> GpuFaults() const;
  // The Xid source's follower; null when the node reads none.
  GpuHealth* gpu_health() { return health_.get(); }

  // The GPUs as the last heartbeat read them (as Start did before the
  // first): memory use and utilisation, for /metrics. Thread-safe; reads
  // no GPU itself, so a scrape never runs the discovery beside a heartbeat.
  std::vector<GpuInfo> LastGpus() const ABSL_LOCKS_EXCLUDED(gpus_mu_);

  // Samples what each running task uses now (task_resources.h), timed by
  // `clock` (the supervisor's: attempts' starts are on it). Thread-safe
  // (one sample at a time).
  std::vector<ResourceSample> SampleResources(const Clock& clock) ABSL_LOCKS_EXCLUDED(sample_mu_);

  // Launches a task after checking its GPUs exist on this node
  // (InvalidArgument naming them); the supervisor rejects GPUs held by
  // another task (FailedPrecondition naming them).
  absl::Status Launch(TaskLaunch launch);
  absl::Status Kill(const TaskKey& key);
  const TaskLogs& logs() const { return supervisor_->logs(); }
  Supervisor& supervisor() { return *supervisor_; }
  // Who tasks run as (task_user.h).
  const TaskUsers& users() const { return *users_; }
  // The images unpacked for tasks (DATA/images).
  ImageStore& images() { return *images_; }
  const ImageStore& images() const { return *images_; }
  const Supervisor& supervisor() const { return *supervisor_; }
  // The data dir, absolute (task directories live under its work/).
  const std::string& data_dir() const { return supervisor_->data_dir(); }

 private:
  AgentCore() = default;
  // Opens the Xid source (AgentConfig::gpu_events) for the GPUs found.
  absl::Status OpenGpuHealth(const std::string& events, const GpuInventory& inventory);

  GpuDiscoveryPtr discovery_;
  ResourceLimiterPtr owned_limiter_;
  std::unique_ptr<MpsDaemons> mps_;  // before supervisor_: outlives it
  std::unique_ptr<TaskUsers> users_;  // the same
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<ImageStore> images_;
  OwnerlessGpuOptions ownerless_;
  std::unique_ptr<GpuHealth> health_;  // null: no Xid source
  const Clock* clock_ = nullptr;
  std::string proc_root_;
  NodeInfo node_;
  std::vector<TaskStatus> adopted_;
  mutable absl::Mutex gpus_mu_;
  std::vector<GpuInfo> last_gpus_ ABSL_GUARDED_BY(gpus_mu_);
  absl::Mutex sample_mu_ ABSL_ACQUIRED_BEFORE(gpus_mu_);
  std::unique_ptr<TaskResourceSampler> sampler_ ABSL_GUARDED_BY(sample_mu_);
};

// MemTotal of PROC_ROOT/meminfo in MiB; an error naming the file.
absl::StatusOr<int64_t> ReadMemTotalMb(const std::string& proc_root = "/proc");
// 1000 per CPU this process may run on (its affinity mask).
int64_t AvailableVcoresMilli();

}  // namespace trainyard::agent
