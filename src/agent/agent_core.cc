// AgentCore: node discovery at start, heartbeat snapshots, and task launch
// checks in front of the supervisor.
#include "agent/agent_core.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/ports_in_use.h"
#include "common/logging.h"

namespace trainyard::agent {
namespace {

constexpr char kAgentLog[] = "agent";

std::string HostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

absl::Status FillNodeIdentity(const AgentConfig& config, NodeInfo* node) {
  node->name = config.node_name.empty() ? HostName() : config.node_name;
  node->address = config.address.empty() ? node->name : config.address;
  node->rack = config.rack;
  node->data_center = config.data_center;
  node->labels = config.labels;
  // The ephemeral range goes to the server, which leaves it out of the
  // default range and warns when a configured range overlaps it.
  absl::StatusOr<core::PortRanges> ephemeral = ReadEphemeralPortRange(config.proc_root);
  if (ephemeral.ok()) node->ephemeral_ports = *ephemeral;
  if (!config.port_range.empty()) {
    absl::StatusOr<core::PortRanges> range = core::PortRanges::Parse(config.port_range);
    if (!range.ok()) return absl::InvalidArgumentError(absl::StrCat("port_range: ", range.status().message()));
    node->port_range = *range;
  }
  if (config.memory_mb < 0 || config.vcores_milli < 0) {
    return absl::InvalidArgumentError("memory_mb and vcores_milli: must be >= 0 (0 = detect)");
  }
  node->memory_mb = config.memory_mb;
  if (node->memory_mb == 0) {
    absl::StatusOr<int64_t> total = ReadMemTotalMb(config.proc_root);
    if (!total.ok()) return total.status();
    node->memory_mb = *total;
  }
  node->vcores_milli = config.vcores_milli > 0 ? config.vcores_milli : AvailableVcoresMilli();
  return absl::OkStatus();
}

void LogTaskUsers(const TaskUsers& users) {
  if (users.switching()) {
    Log(LogLevel::kInfo, kAgentLog, "tasks run as the local accounts their users map to, with no_new_privs");
  } else {
    Log(LogLevel::kInfo, kAgentLog,
        "the agent is not root: tasks run as its own uid %d (no_new_privs), not as their users", geteuid());
  }
}

}  // namespace

absl::StatusOr<int64_t> ReadMemTotalMb(const std::string& proc_root) {
  std::string path = proc_root + "/meminfo";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, "; set memory_mb in the config"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kb = 0;
    if (parts.size() >= 2 && parts[0] == "MemTotal:" && absl::SimpleAtoi(parts[1], &kb)) return kb / 1024;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, " has no \"MemTotal: N kB\" line"));
}

int64_t AvailableVcoresMilli() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return int64_t{1000} * CPU_COUNT(&set);
  return int64_t{1000} * sysconf(_SC_NPROCESSORS_ONLN);
}

absl::StatusOr<std::unique_ptr<AgentCore>> AgentCore::Start(const AgentConfig& config,
                                                            TaskListener* listener,
                                                            GpuDiscoveryPtr discovery) {
  if (config.data_dir.empty()) return absl::InvalidArgumentError("data_dir: must be set");
  if (config.clock == nullptr) return absl::InvalidArgumentError("clock: must be set");
  std::unique_ptr<AgentCore> agent(new AgentCore());
  if (absl::Status s = FillNodeIdentity(config, &agent->node_); !s.ok()) return s;
  agent->proc_root_ = config.proc_root;
  agent->ownerless_ = config.ownerless;
  if (discovery == nullptr) {
    absl::StatusOr<GpuDiscoveryPtr> chosen = ChooseGpuDiscovery(config.gpu);
    if (!chosen.ok()) return chosen.status();
    discovery = *std::move(chosen);
  }
  agent->discovery_ = std::move(discovery);
  absl::StatusOr<GpuInventory> inventory = agent->discovery_->Discover();
  if (!inventory.ok()) {
    return absl::UnavailableError(absl::StrCat("GPU discovery (", agent->discovery_->Name(),
                                               "): ", inventory.status().message()));
  }
  absl::StatusOr<std::string> mps_control =
      ChooseMpsControl(config.mps, config.mps_control, inventory->source == "simulated");
  if (!mps_control.ok()) return mps_control.status();
  if (!mps_control->empty()) {
    std::error_code ec;
    std::filesystem::path data = std::filesystem::absolute(config.data_dir, ec);
    agent->mps_ = std::make_unique<MpsDaemons>(MpsOptions{.control = *mps_control, .dir = (data / "mps").string()});
  }
  ResourceLimiter* limiter = config.limiter;
  if (limiter == nullptr) {
    agent->owned_limiter_ = DetectResourceLimiter({.cgroup_root = config.cgroup_root});
    limiter = agent->owned_limiter_.get();
  }
  if (config.task_pids_max < 0) return absl::InvalidArgumentError("task_pids_max: must be >= 0 (0 = no limit)");
  agent->users_ = std::make_unique<TaskUsers>(config.task_users);
  LogTaskUsers(*agent->users_);
  std::string oci_runtime = config.oci_runtime.empty() ? FindOciRuntime() : config.oci_runtime;
  absl::StatusOr<std::unique_ptr<Supervisor>> supervisor =
      Supervisor::Create({.data_dir = config.data_dir, .clock = config.clock, .limiter = limiter, .listener = listener,
                          .log_max_attempt_bytes = config.log_max_attempt_bytes,
                          .mps = agent->mps_.get(),
                          .users = agent->users_.get(),
                          .task_pids_max = config.task_pids_max,
                          .task_dir_retention = config.task_dir_retention,
                          .oci_runtime = oci_runtime});
  if (!supervisor.ok()) return supervisor.status();
  agent->supervisor_ = *std::move(supervisor);
  agent->images_ = std::make_unique<ImageStore>(agent->supervisor_->data_dir() + "/images", nullptr,
                                                config.insecure_registries);
  if (config.adopt_tasks) agent->adopted_ = agent->supervisor_->Adopt();
  agent->clock_ = config.clock;
  if (absl::Status st = agent->OpenGpuHealth(config.gpu_events, *inventory); !st.ok()) return st;
  NodeInfo& node = agent->node_;
  node.gpus = inventory->gpus;
  {
    absl::MutexLock lock(&agent->gpus_mu_);
    agent->last_gpus_ = inventory->gpus;
  }
  node.topology = inventory->topology;
  node.gpu_source = inventory->source;
  node.oci_runtime = oci_runtime;
  node.mps_control = *mps_control;
  node.limiter = limiter->kind();
  node.excluded_gpus = OwnerlessBusyGpus(node.gpus, agent->supervisor_->GpusInUse(), config.ownerless);
  Log(LogLevel::kInfo, kAgentLog, "node %s: %d GPUs (%s%s), %d MiB, %d millicores, ports %s%s",
      node.name, static_cast<int>(node.gpus.size()), node.gpu_source,
      node.mps_control.empty() ? "" : absl::StrCat(", MPS for shares via ", node.mps_control), node.memory_mb,
      node.vcores_milli, node.port_range.Empty() ? "as the server decides" : node.port_range.ToString(),
      node.excluded_gpus.Empty() ? "" : absl::StrCat(", excluded GPUs ", node.excluded_gpus.ToString()));
  return agent;
}

absl::StatusOr<core::PortRanges> AgentCore::PortsInUse() const { return ReadPortsInUse(proc_root_); }

absl::StatusOr<HeartbeatSnapshot> AgentCore::Heartbeat() {
  HeartbeatSnapshot snapshot;
  // The GPUs' health first: a GPU that fell off the bus (Xid 79) can make
  // the discovery below fail, and its fault must still go out.
  if (health_) {
    health_->Poll(clock_->Now());
    snapshot.gpu_faults = health_->Faults();
  }
  absl::StatusOr<GpuInventory> inventory = discovery_->Discover();
  if (!inventory.ok() && snapshot.gpu_faults.empty()) {
    return absl::UnavailableError(absl::StrCat("GPU discovery (", discovery_->Name(), "): ",
                                               inventory.status().message()));
  }
  if (inventory.ok()) {
    snapshot.gpus = std::move(inventory->gpus);
    absl::MutexLock lock(&gpus_mu_);
    last_gpus_ = snapshot.gpus;
  } else {
    // A faulty GPU broke the discovery: the beat goes with the GPUs as last
    // read, so the server hears of the fault rather than losing the node.
    Log(LogLevel::kWarning, kAgentLog,
        "GPU discovery (%s) failed beside GPU faults: %s; beating with the GPUs as last read", discovery_->Name(),
        inventory.status().message());
    snapshot.gpus = LastGpus();
  }
  absl::StatusOr<core::PortRanges> ports = ReadPortsInUse(proc_root_);
  if (!ports.ok()) return ports.status();
  snapshot.ports_in_use = *std::move(ports);
  snapshot.tasks = supervisor_->Snapshot();
  snapshot.gpus_in_use = supervisor_->GpusInUse();
  snapshot.excluded_gpus = OwnerlessBusyGpus(snapshot.gpus, snapshot.gpus_in_use, ownerless_);
  return snapshot;
}

std::vector<v1::GpuFault> AgentCore::GpuFaults() const {
  return health_ ? health_->Faults() : std::vector<v1::GpuFault>();
}

absl::Status AgentCore::OpenGpuHealth(const std::string& events, const GpuInventory& inventory) {
  if (events == "none" || inventory.gpus.empty()) return absl::OkStatus();
  std::string path = events;
  if (path.empty() && inventory.source == "simulated") {
    // The simulated GPUs' driver log: a file root (or the agent's account)
    // appends Xid lines to (docs/gpu-health.md).
    path = supervisor_->data_dir() + "/gpu-events";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat("gpu_events: cannot make ", path, ": ", strerror(errno)));
    }
    close(fd);
  } else if (path.empty()) {
    path = "/dev/kmsg";
  }
  absl::StatusOr<std::unique_ptr<GpuHealth>> health = GpuHealth::Open(path, inventory.gpus);
  if (!health.ok()) {
    // The kernel's log may be closed to the agent's account
    // (kernel.dmesg_restrict): the node runs without GPU health, and says so.
    if (!events.empty()) return health.status();
    Log(LogLevel::kWarning, kAgentLog, "GPU health is not watched: %s", health.status().message());
    return absl::OkStatus();
  }
  health_ = *std::move(health);
  Log(LogLevel::kInfo, kAgentLog, "GPU health: Xid events from %s", health_->path());
  return absl::OkStatus();
}

std::vector<GpuInfo> AgentCore::LastGpus() const {
  absl::MutexLock lock(&gpus_mu_);
  return last_gpus_;
}

std::vector<ResourceSample> AgentCore::SampleResources(const Clock& clock) {
  std::vector<ResourceTarget> targets = supervisor_->ResourceTargets();
  std::vector<GpuInfo> gpus = LastGpus();
  absl::MutexLock lock(&sample_mu_);
  if (!sampler_) sampler_ = std::make_unique<TaskResourceSampler>(proc_root_);
  // The time read once the locks are held: a wait for them is not counted
  // in a rate.
  return sampler_->Sample(targets, supervisor_->limiter(), gpus, node_.gpu_source == "simulated", clock.Now());
}

absl::Status AgentCore::Launch(TaskLaunch launch) {
  int gpu_count = static_cast<int>(node_.gpus.size());
  core::GpuSet outside = launch.gpus - core::GpuSet::FirstN(gpu_count);
  if (!outside.Empty()) {
    return absl::InvalidArgumentError(absl::StrCat("task ", launch.key.ToString(), ": GPUs ",
                                                   outside.ToString(), " do not exist on node ",
                                                   node_.name, " (", gpu_count, " GPUs)"));
  }
  return supervisor_->Launch(std::move(launch));
}

absl::Status AgentCore::Kill(const TaskKey& key) { return supervisor_->Kill(key); }

}  // namespace trainyard::agent
