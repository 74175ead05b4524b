// ClusterState: node and job bookkeeping. Allocation arithmetic and usage
// accounting live in cluster_state_alloc.cc.
#include "core/state/cluster_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace trainyard::core {
namespace {

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::StatusOr<NodeId> ClusterState::NodeNamed(std::string_view name) const {
  auto it = node_by_name_.find(Av(name));
  if (it == node_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("node ", std::string(name), " is unknown"));
  }
  return it->second;
}

absl::StatusOr<JobSlot> ClusterState::JobNamed(std::string_view id) const {
  auto it = job_by_id_.find(Av(id));
  if (it == job_by_id_.end()) return absl::NotFoundError(absl::StrCat("job ", std::string(id), " is unknown"));
  return it->second;
}

std::optional<NodeId> ClusterState::FindNode(std::string_view name) const {
  auto it = node_by_name_.find(Av(name));
  if (it == node_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<JobSlot> ClusterState::FindJob(std::string_view id) const {
  auto it = job_by_id_.find(Av(id));
  if (it == job_by_id_.end()) return std::nullopt;
  return it->second;
}

namespace {

absl::Status ValidateNode(const NodeSpec& spec) {
  auto err = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("node ", spec.name, ": ", what));
  };
  if (spec.name.empty()) return absl::InvalidArgumentError("node name is empty");
  const Resource& c = spec.capacity;
  if (c.memory_mb < 0 || c.vcores_milli < 0 || c.gpus < 0) {
    return err(absl::StrCat("negative capacity ", c.ToString()));
  }
  if (c.gpus > kMaxGpus) return err(absl::StrCat("gpus ", c.gpus, " is above ", kMaxGpus));
  if (spec.gpu_memory_mb < 0) return err(absl::StrCat("gpu_memory_mb ", spec.gpu_memory_mb, " is negative"));
  if (spec.topology.gpu_count() != c.gpus) {
    return err(absl::StrCat("topology has ", spec.topology.gpu_count(),
                            " GPUs but capacity.gpus is ", c.gpus));
  }
  if (c.gpu_mask != 0 && !spec.topology.all().ContainsAll(GpuSet(c.gpu_mask))) {
    return err(absl::StrCat("gpu_mask ", GpuSet(c.gpu_mask).ToString(),
                            " has GPUs outside 0..", c.gpus - 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ClusterState::AddNode(const NodeSpec& spec) {
  if (absl::Status s = ValidateNode(spec); !s.ok()) return s;
  if (node_by_name_.contains(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat("node ", spec.name, " is already known"));
  }
  NodeId n;
  if (!free_node_slots_.empty()) {
    n = free_node_slots_.back();
    free_node_slots_.pop_back();
  } else {
    n = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
    node_ports_.emplace_back();
  }
  NodeState& node = nodes_[n];
  node = NodeState{};
  node_ports_[n] = NodePorts{};
  node.name = spec.name;
  node.rack = spec.rack.empty() ? -1 : InternRack(spec.rack);
  node.labels = InternLabels(spec.labels);
  node.topology = InternTopology(spec.topology);
  node.capacity = spec.capacity;
  if (node.capacity.gpu_mask == 0) node.capacity.gpu_mask = spec.topology.all().bits();
  node.capacity.gpus = GpuSet(node.capacity.gpu_mask).Count();
  node.capacity.port_count = 0;
  node.free = node.capacity;
  RefreshPorts(n);
  node.schedulable = spec.schedulable;
  node.gpu_model = spec.gpu_model.empty() ? -1 : InternGpuModel(spec.gpu_model);
  node.gpu_memory_mb = spec.gpu_memory_mb;
  node.present = true;
  node_by_name_.emplace(spec.name, n);
  if (node.rack >= 0) rack_nodes_[node.rack].push_back(n);
  ++node_count_;
  max_node_gpus_ = std::max(max_node_gpus_, node.capacity.gpus);
  if (node.schedulable) cluster_capacity_ = AddScalars(cluster_capacity_, ScalarsOf(node.capacity));
  Reindex(n);
  return absl::OkStatus();
}

absl::Status ClusterState::RemoveNode(std::string_view name, std::vector<std::string>* requeued) {
  absl::StatusOr<NodeId> n = NodeNamed(name);
  if (!n.ok()) return n.status();
  NodeState& node = nodes_[*n];
  std::vector<JobSlot> jobs;
  for (const NodeTask& t : node.tasks) jobs.push_back(t.job);
  std::sort(jobs.begin(), jobs.end());
  jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
  for (JobSlot j : jobs) {
    ReleaseAllTasks(j, Release::kEnded);
    SetPhase(j, JobPhase::kPending, absl::InfinitePast());
    if (requeued != nullptr) requeued->push_back(jobs_[j].request.id);
  }
  if (node.schedulable) {
    cluster_capacity_ = SubtractScalars(cluster_capacity_, ScalarsOf(node.capacity));
  }
  if (node.rack >= 0) {
    std::vector<NodeId>& rack = rack_nodes_[node.rack];
    rack.erase(std::find(rack.begin(), rack.end(), *n));
  }
  node.present = false;
  CountFreeShare(*n);
  index_.Remove(*n);
  share_index_.Remove(*n);
  node_by_name_.erase(node.name);
  node = NodeState{};
  node_ports_[*n] = NodePorts{};
  std::erase(cooling_nodes_, *n);
  free_node_slots_.push_back(*n);
  --node_count_;
  return absl::OkStatus();
}

absl::Status ClusterState::SetSchedulable(std::string_view name, bool schedulable) {
  absl::StatusOr<NodeId> n = NodeNamed(name);
  if (!n.ok()) return n.status();
  NodeState& node = nodes_[*n];
  if (node.schedulable == schedulable) return absl::OkStatus();
  node.schedulable = schedulable;
  Resource cap = ScalarsOf(node.capacity);
  cluster_capacity_ =
      schedulable ? AddScalars(cluster_capacity_, cap) : SubtractScalars(cluster_capacity_, cap);
  Reindex(*n);
  return absl::OkStatus();
}

absl::Status ClusterState::SetExcludedGpus(std::string_view name, GpuSet excluded) {
  absl::StatusOr<NodeId> n = NodeNamed(name);
  if (!n.ok()) return n.status();
  NodeState& node = nodes_[*n];
  // What its tasks hold stays theirs: an excluded GPU a task holds goes out
  // of service when the task releases it (ReleaseTask, GiveShare). Held is
  // what is neither free nor out of service unheld (ReclaimableGpus).
  uint64_t held = node.capacity.gpu_mask & ~node.free.gpu_mask & ~ReclaimableGpus(*n);
  node.excluded = node.capacity.gpu_mask & excluded.bits();
  node.free.gpu_mask = node.capacity.gpu_mask & ~node.excluded & ~held;
  node.free.gpus = GpuSet(node.free.gpu_mask).Count();
  Reindex(*n);
  return absl::OkStatus();
}

absl::Status ClusterState::AddJob(const JobRequest& job) {
  if (absl::Status s = ValidateJob(job); !s.ok()) return s;
  if (job_by_id_.contains(job.id)) {
    return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " is already known"));
  }
  JobSlot j;
  if (!free_job_slots_.empty()) {
    j = free_job_slots_.back();
    free_job_slots_.pop_back();
  } else {
    j = static_cast<JobSlot>(jobs_.size());
    jobs_.emplace_back();
    briefs_.emplace_back();
  }
  JobState& state = jobs_[j];
  state = JobState{};
  state.request = job;
  state.queue = InternQueue(job.queue);
  state.user = InternUser(job.user);
  state.seq = next_seq_++;
  state.live = true;
  state.phase = JobPhase::kPending;
  briefs_[j] =
      JobBrief{.priority = job.priority, .queue = state.queue, .checkpoints = job.checkpoints,
               .last_preemption = job.last_preemption, .elastic = job.elastic};
  job_by_id_.emplace(job.id, j);
  ++job_count_;
  EnterPending(j);
  return absl::OkStatus();
}

absl::Status ClusterState::RemoveJob(std::string_view id) {
  absl::StatusOr<JobSlot> j = JobNamed(id);
  if (!j.ok()) return j.status();
  if (jobs_[*j].phase == JobPhase::kPreempting) {
    SetPhase(*j, JobPhase::kRunning, jobs_[*j].start_time);  // settles preempting usage
  }
  ReleaseAllTasks(*j, Release::kEnded);
  if (jobs_[*j].phase == JobPhase::kPending) LeavePending(*j);
  job_by_id_.erase(jobs_[*j].request.id);
  jobs_[*j] = JobState{};
  briefs_[*j] = JobBrief{};
  free_job_slots_.push_back(*j);
  --job_count_;
  return absl::OkStatus();
}

absl::Status ClusterState::SetLastPreemption(std::string_view id, bool last) {
  absl::StatusOr<JobSlot> j = JobNamed(id);
  if (!j.ok()) return j.status();
  jobs_[*j].request.last_preemption = last;
  briefs_[*j].last_preemption = last;
  return absl::OkStatus();
}

absl::Status ClusterState::RequeueJob(std::string_view id) {
  absl::StatusOr<JobSlot> j = JobNamed(id);
  if (!j.ok()) return j.status();
  if (jobs_[*j].phase == JobPhase::kPending) {
    return absl::FailedPreconditionError(absl::StrCat("job ", std::string(id), " is already pending"));
  }
  ReleaseAllTasks(*j, Release::kEnded);
  SetPhase(*j, JobPhase::kPending, absl::InfinitePast());
  return absl::OkStatus();
}

absl::Status ClusterState::TaskFinished(std::string_view id, std::string_view role,
                                        int32_t index) {
  absl::StatusOr<JobSlot> j = JobNamed(id);
  if (!j.ok()) return j.status();
  JobState& job = jobs_[*j];
  for (size_t pos = 0; pos < job.tasks.size(); ++pos) {
    const PlacedTask& t = job.tasks[pos];
    if (job.request.roles[t.role].name == role && t.index == index && t.node >= 0) {
      ReleaseTask(*j, static_cast<int32_t>(pos), Release::kEnded);
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(
      absl::StrCat("job ", std::string(id), " has no running task ", std::string(role), "-", index));
}

std::vector<TaskAssignment> ClusterState::Assignments(JobSlot j) const {
  std::vector<TaskAssignment> out;
  const JobState& job = jobs_[j];
  for (const PlacedTask& t : job.tasks) {
    if (t.node < 0) continue;
    out.push_back(TaskAssignment{.role = job.request.roles[t.role].name,
                                 .index = t.index,
                                 .node = nodes_[t.node].name,
                                 .allocation = t.allocation});
  }
  return out;
}

}  // namespace trainyard::core
