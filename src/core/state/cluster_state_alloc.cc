// ClusterState: allocation arithmetic on nodes, usage per queue and user,
// the pending sets, interning of shared node attributes, and the index.
// The core is the only code that allocates, so the arithmetic checks its own
// invariants: an allocation is a subset of what is free, and a release never
// drives a usage negative nor a node's free resources above its capacity.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

int32_t ClusterState::InternLabels(const Labels& labels) {
  for (size_t i = 0; i < label_sets_.size(); ++i) {
    if (label_sets_[i] == labels) return static_cast<int32_t>(i);
  }
  label_sets_.push_back(labels);
  return static_cast<int32_t>(label_sets_.size() - 1);
}

int32_t ClusterState::InternTopology(const GpuTopology& t) {
  for (size_t i = 0; i < topologies_.size(); ++i) {
    if (topologies_[i] == t) return static_cast<int32_t>(i);
  }
  topologies_.push_back(t);
  return static_cast<int32_t>(topologies_.size() - 1);
}

int32_t ClusterState::InternRack(std::string_view rack) {
  for (size_t i = 0; i < racks_.size(); ++i) {
    if (racks_[i] == rack) return static_cast<int32_t>(i);
  }
  racks_.emplace_back(rack);
  rack_nodes_.emplace_back();
  return static_cast<int32_t>(racks_.size() - 1);
}

int32_t ClusterState::InternGpuModel(std::string_view model) {
  for (size_t i = 0; i < gpu_models_.size(); ++i) {
    if (gpu_models_[i] == model) return static_cast<int32_t>(i);
  }
  gpu_models_.emplace_back(model);
  return static_cast<int32_t>(gpu_models_.size() - 1);
}

const std::string& ClusterState::gpu_model(NodeId n) const {
  static const std::string* const kUnknown = new std::string();
  int32_t m = nodes_[n].gpu_model;
  return m < 0 ? *kUnknown : gpu_models_[m];
}

namespace {

// True when a GPU model a task names, `wanted`, admits a node's `model`:
// the same name, or a family name without memory admitting each of its
// sizes ("V100" admits "V100M16" and "V100M32"; names in the short form of
// api::CanonicalGpuModel).
bool GpuModelMatches(std::string_view wanted, std::string_view model) {
  if (wanted == model) return true;
  if (wanted.empty() || model.substr(0, wanted.size()) != wanted) return false;
  std::string_view rest = model.substr(wanted.size());
  if (rest.size() < 2 || rest[0] != 'M') return false;
  return std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool ClusterState::ModelAllows(const RoleRequest& role, NodeId n) const {
  if (role.gpu_models.empty()) return true;
  int32_t m = nodes_[n].gpu_model;
  if (m < 0) return false;
  return std::any_of(role.gpu_models.begin(), role.gpu_models.end(),
                     [&](const std::string& w) { return GpuModelMatches(w, gpu_models_[m]); });
}

uint64_t ClusterState::ModelMask(const RoleRequest& role) const {
  uint64_t mask = 0;
  for (const std::string& w : role.gpu_models) {
    bool any = false;
    for (size_t i = 0; i < gpu_models_.size(); ++i) {
      if (!GpuModelMatches(w, gpu_models_[i])) continue;
      mask |= uint64_t{1} << std::min<size_t>(i, 63);
      any = true;
    }
    if (!any) mask |= uint64_t{1} << 63;
  }
  return mask;
}

int32_t ClusterState::InternQueue(std::string_view name) {
  for (size_t i = 0; i < queue_names_.size(); ++i) {
    if (queue_names_[i] == name) return static_cast<int32_t>(i);
  }
  queue_names_.emplace_back(name);
  pending_.emplace_back();
  queue_used_.emplace_back();
  queue_preempting_.emplace_back();
  queue_share_milli_.push_back(0);
  return static_cast<int32_t>(queue_names_.size() - 1);
}

int32_t ClusterState::InternUser(std::string_view user) {
  for (size_t i = 0; i < user_names_.size(); ++i) {
    if (user_names_[i] == user) return static_cast<int32_t>(i);
  }
  user_names_.emplace_back(user);
  return static_cast<int32_t>(user_names_.size() - 1);
}

Resource ClusterState::UserUsed(int32_t queue, int32_t user) const {
  auto it = user_used_.find((static_cast<uint64_t>(queue) << 32) | static_cast<uint32_t>(user));
  return it == user_used_.end() ? Resource{} : it->second;
}

PendingKey ClusterState::KeyOf(JobSlot j) const {
  const JobState& job = jobs_[j];
  return PendingKey{.neg_priority = -static_cast<int32_t>(job.request.priority),
                    .submit_ns = absl::ToUnixNanos(job.request.submit_time),
                    .seq = job.seq,
                    .job = j};
}

void ClusterState::EnterPending(JobSlot j) {
  if (pending_[jobs_[j].queue].insert(KeyOf(j)).second) ++pending_count_;
}

void ClusterState::LeavePending(JobSlot j) {
  if (pending_[jobs_[j].queue].erase(KeyOf(j)) > 0) --pending_count_;
}

void ClusterState::SetPhase(JobSlot j, JobPhase phase, absl::Time at) {
  JobState& job = jobs_[j];
  if (job.phase == phase) return;
  if (job.phase == JobPhase::kPending) LeavePending(j);
  if (job.phase == JobPhase::kPreempting) {
    queue_preempting_[job.queue] = SubtractScalars(queue_preempting_[job.queue], job.preempting_used);
    job.preempting_used = Resource{};
  }
  if (phase == JobPhase::kPreempting) {
    job.preempting_used = job.used;
    queue_preempting_[job.queue] = AddScalars(queue_preempting_[job.queue], job.used);
  }
  job.phase = phase;
  briefs_[j].phase = phase;
  if (phase == JobPhase::kPending) EnterPending(j);
  if (phase == JobPhase::kRunning) job.start_time = briefs_[j].start_time = at;
  if (phase == JobPhase::kPreempting) job.grace_deadline = at;
}

void ClusterState::SetReservation(NodeId n, JobSlot j) { nodes_[n].reserved_for = j; }

void ClusterState::CountFreeShare(NodeId n) {
  NodeState& node = nodes_[n];
  int64_t now = 0;
  if (node.present && node.schedulable) {
    for (uint64_t m = node.capacity.gpu_mask & ~node.excluded; m != 0; m &= m - 1) {
      now += node.FreeShare(__builtin_ctzll(m));
    }
  }
  int64_t delta = now - node.counted_free_share;
  if (delta == 0) return;
  node.counted_free_share = now;
  free_share_total_ += delta;
  if (node.gpu_model < 0) return;
  if (model_free_share_.size() < gpu_models_.size()) model_free_share_.resize(gpu_models_.size(), 0);
  model_free_share_[node.gpu_model] += delta;
}

void ClusterState::Reindex(NodeId n) {
  CountFreeShare(n);
  const NodeState& node = nodes_[n];
  if (!node.present || !node.schedulable) {
    index_.Remove(n);
    share_index_.Remove(n);
    return;
  }
  index_.Update(n, ShapeOf(topologies_[node.topology], GpuSet(node.free.gpu_mask)));
  int best = 0;
  for (uint64_t m = node.shared & ~node.excluded; m != 0; m &= m - 1) {
    best = std::max(best, 1000 - node.share_used[__builtin_ctzll(m)]);
  }
  if (best > 0) {
    share_index_.UpdateKey(n, static_cast<NodeIndex::Key>(best));
  } else {
    share_index_.Remove(n);
  }
}

// A share's GPU leaves the whole-GPU view with its first share and comes
// back with its last, so whole-GPU placement never sees a partly used GPU.
void ClusterState::TakeShare(NodeState& node, const Resource& a) {
  int g = __builtin_ctzll(a.gpu_mask);
  if (node.share_used.empty()) {
    node.share_used.assign(node.capacity.gpus, 0);
    node.share_memory_used.assign(node.capacity.gpus, 0);
  }
  if ((node.shared & a.gpu_mask) == 0) {
    if ((node.free.gpu_mask & a.gpu_mask) != 0) {  // else taken back out of service (AllocateTask)
      node.free.gpu_mask &= ~a.gpu_mask;
      node.free.gpus -= 1;
    }
    node.shared |= a.gpu_mask;
  }
  node.share_used[g] = static_cast<int16_t>(node.share_used[g] + a.gpu_milli);
  node.share_memory_used[g] += a.gpu_memory_mb;
}

void ClusterState::GiveShare(NodeState& node, const Resource& a) {
  int g = __builtin_ctzll(a.gpu_mask);
  node.share_used[g] = static_cast<int16_t>(node.share_used[g] - a.gpu_milli);
  node.share_memory_used[g] -= a.gpu_memory_mb;
  if (node.share_used[g] > 0) return;
  node.shared &= ~a.gpu_mask;
  node.share_memory_used[g] = 0;
  if ((node.excluded & a.gpu_mask) == 0) {
    node.free.gpu_mask |= a.gpu_mask;
    node.free.gpus += 1;
  }
}

std::string NotFree(const Resource& a, const NodeState& node, uint64_t reclaimable) {
  const Resource& free = node.free;
  int32_t reclaimed = 0;  // whole GPUs of `a` taken back out of service
  if (a.IsGpuShare()) {
    int g = __builtin_ctzll(a.gpu_mask);
    int32_t share = (reclaimable & a.gpu_mask) != 0 && (node.shared & a.gpu_mask) == 0 ? 1000 : node.FreeShare(g);
    if (share < a.gpu_milli) {
      return absl::StrCat("GPU ", g, " has ", FormatVcores(share), " of its share free, ", FormatVcores(a.gpu_milli),
                          " wanted");
    }
  } else if (uint64_t taken = a.gpu_mask & ~(free.gpu_mask | reclaimable); taken != 0) {
    return absl::StrCat("GPUs ", GpuSet(taken).ToString(), " are not free");
  } else if (uint64_t back = a.gpu_mask & ~free.gpu_mask; back != 0) {
    reclaimed = GpuSet(back).Count();
  }
  if (a.memory_mb > free.memory_mb) {
    return absl::StrCat(a.memory_mb, " MB memory wanted, ", free.memory_mb, " MB free");
  }
  if (a.vcores_milli > free.vcores_milli) {
    return absl::StrCat(FormatVcores(a.vcores_milli), " vcores wanted, ",
                        FormatVcores(free.vcores_milli), " free");
  }
  if (a.gpus > free.gpus + reclaimed) return absl::StrCat(a.gpus, " GPUs wanted, ", free.gpus, " free");
  if (!free.ports.ContainsAll(a.ports)) {
    return absl::StrCat("ports ", a.ports.Subtract(free.ports).ToString(), " are not free");
  }
  return "";
}

uint64_t ClusterState::ReclaimableGpus(NodeId n) const {
  const NodeState& node = nodes_[n];
  if (node.excluded == 0) return 0;
  uint64_t held = node.shared;
  for (const NodeTask& nt : node.tasks) held |= jobs_[nt.job].tasks[nt.pos].allocation.gpu_mask;
  return node.excluded & ~held;
}

void ClusterState::AllocateTask(JobSlot j, int32_t role, int32_t index, NodeId n,
                                const Resource& allocation) {
  NodeState& node = nodes_[n];
  JobState& job = jobs_[j];
  if (std::string taken = NotFree(allocation, node, ReclaimableGpus(n)); !taken.empty()) {
    TY_CHECK(false, "job %s task %d-%d on node %s: %s", job.request.id.c_str(), role, index,
             node.name.c_str(), taken.c_str());
  }
  TY_CHECK(NonNegative(allocation), "job %s task %d-%d: a negative allocation",
           job.request.id.c_str(), role, index);
  node.free.memory_mb -= allocation.memory_mb;
  node.free.vcores_milli -= allocation.vcores_milli;
  if (allocation.IsGpuShare()) {
    TakeShare(node, allocation);
  } else {
    // Its GPUs taken back out of service (ReclaimableGpus) were not free.
    uint64_t back = allocation.gpu_mask & ~node.free.gpu_mask;
    node.free.gpus -= back == 0 ? allocation.gpus : allocation.gpus - GpuSet(back).Count();
    node.free.gpu_mask &= ~allocation.gpu_mask;
  }
  if (!allocation.ports.Empty()) {
    node.free.ports = node.free.ports.Subtract(allocation.ports);
    RefreshPorts(n);
  }
  int32_t pos = static_cast<int32_t>(job.tasks.size());
  job.tasks.push_back(PlacedTask{.role = role, .index = index, .node = n, .allocation = allocation});
  node.tasks.push_back(NodeTask{.job = j,
                                .pos = pos,
                                .gpus = allocation.gpus,
                                .memory_mb = allocation.memory_mb,
                                .vcores_milli = allocation.vcores_milli,
                                .gpu_milli = allocation.gpu_milli});
  briefs_[j].gpus += allocation.gpus;
  Resource scalars = ScalarsOf(allocation);
  job.used = AddScalars(job.used, scalars);
  queue_used_[job.queue] = AddScalars(queue_used_[job.queue], scalars);
  if (allocation.IsGpuShare()) queue_share_milli_[job.queue] += allocation.gpu_milli;
  Resource& user = user_used_[(static_cast<uint64_t>(job.queue) << 32) |
                              static_cast<uint32_t>(job.user)];
  user = AddScalars(user, scalars);
  if (allocation.gpus > 0 || allocation.gpu_mask != 0) Reindex(n);
}

void ClusterState::ReleaseTask(JobSlot j, int32_t pos, Release how) {
  JobState& job = jobs_[j];
  PlacedTask& task = job.tasks[pos];
  if (task.node < 0) return;
  NodeState& node = nodes_[task.node];
  const Resource& a = task.allocation;
  node.free.memory_mb += a.memory_mb;
  node.free.vcores_milli += a.vcores_milli;
  if (a.IsGpuShare()) {
    GiveShare(node, a);
  } else {
    // An excluded GPU does not come back (SetExcludedGpus).
    uint64_t back = a.gpu_mask & ~node.excluded;
    node.free.gpus += back == a.gpu_mask ? a.gpus : GpuSet(back).Count();
    node.free.gpu_mask |= back;
  }
  if (!a.ports.Empty()) {
    node.free.ports = node.free.ports.Union(a.ports);
    if (how == Release::kEnded) {
      std::vector<CoolingPorts>& cooling = node_ports_[task.node].cooling;
      if (cooling.empty()) cooling_nodes_.push_back(task.node);
      cooling.push_back(CoolingPorts{.ports = a.ports});
    }
    RefreshPorts(task.node);
  }
  briefs_[j].gpus -= a.gpus;
  auto it = std::find_if(node.tasks.begin(), node.tasks.end(),
                         [&](const NodeTask& t) { return t.job == j && t.pos == pos; });
  if (it != node.tasks.end()) {
    *it = node.tasks.back();
    node.tasks.pop_back();
  }
  Resource scalars = ScalarsOf(a);
  job.used = SubtractScalars(job.used, scalars);
  queue_used_[job.queue] = SubtractScalars(queue_used_[job.queue], scalars);
  if (a.IsGpuShare()) queue_share_milli_[job.queue] -= a.gpu_milli;
  uint64_t key = (static_cast<uint64_t>(job.queue) << 32) | static_cast<uint32_t>(job.user);
  Resource& user = user_used_[key];
  user = SubtractScalars(user, scalars);
  TY_CHECK(NonNegative(job.used) && NonNegative(queue_used_[job.queue]) && NonNegative(user) &&
               queue_share_milli_[job.queue] >= 0,
           "job %s: a release drove its, its queue's or its user's usage negative",
           job.request.id.c_str());
  TY_CHECK(AllLessOrEqual(node.free, node.capacity),
           "node %s: a release of job %s left more free than its capacity (released twice?)",
           node.name.c_str(), job.request.id.c_str());
  if (user.memory_mb == 0 && user.vcores_milli == 0 && user.gpus == 0) user_used_.erase(key);
  NodeId n = task.node;
  task.node = -1;
  if (a.gpus > 0 || a.gpu_mask != 0) Reindex(n);
}

void ClusterState::ReleaseAllTasks(JobSlot j, Release how) {
  for (size_t pos = 0; pos < jobs_[j].tasks.size(); ++pos) {
    ReleaseTask(j, static_cast<int32_t>(pos), how);
  }
  jobs_[j].tasks.clear();
}

void ClusterState::UndoLastTask(JobSlot j) {
  TY_CHECK(!jobs_[j].tasks.empty(), "job %s has no task to undo", jobs_[j].request.id.c_str());
  ReleaseTask(j, static_cast<int32_t>(jobs_[j].tasks.size() - 1), Release::kTentative);
  jobs_[j].tasks.pop_back();
}

void ClusterState::RefreshPorts(NodeId n) {
  const PortRanges& free = nodes_[n].free.ports;
  NodePorts& p = node_ports_[n];
  p.open = p.in_use.Empty() ? free : free.Subtract(p.in_use);
  if (p.cooling.empty()) {
    p.spare = p.open;
    return;
  }
  PortRanges cooling;
  for (const CoolingPorts& c : p.cooling) cooling = cooling.Union(c.ports);
  p.spare = p.open.Subtract(cooling);
}

absl::Status ClusterState::SetPortsInUse(std::string_view name, const PortRanges& in_use) {
  absl::StatusOr<NodeId> n = NodeNamed(name);
  if (!n.ok()) return n.status();
  PortRanges served = in_use.Intersect(nodes_[*n].capacity.ports);
  NodePorts& p = node_ports_[*n];
  if (served == p.in_use) return absl::OkStatus();
  p.in_use = std::move(served);
  RefreshPorts(*n);
  return absl::OkStatus();
}

void ClusterState::ExpireCoolingPorts(absl::Time now, absl::Duration quarantine) {
  size_t keep = 0;
  for (NodeId n : cooling_nodes_) {
    std::vector<CoolingPorts>& cooling = node_ports_[n].cooling;
    size_t before = cooling.size();
    for (CoolingPorts& c : cooling) {
      if (c.until == absl::InfiniteFuture()) c.until = now + quarantine;
    }
    std::erase_if(cooling, [&](const CoolingPorts& c) { return c.until <= now; });
    if (cooling.size() != before) RefreshPorts(n);
    if (!cooling.empty()) cooling_nodes_[keep++] = n;
  }
  cooling_nodes_.resize(keep);
}

size_t ClusterState::ApproxBytes() const {
  size_t bytes = sizeof(*this) + nodes_.capacity() * sizeof(NodeState) +
                 jobs_.capacity() * sizeof(JobState) + briefs_.capacity() * sizeof(JobBrief) +
                 node_ports_.capacity() * sizeof(NodePorts);
  for (const NodeState& node : nodes_) {
    bytes += node.tasks.capacity() * sizeof(node.tasks[0]);
    if (node.name.size() > 15) bytes += node.name.capacity();
    bytes += node.free.ports.ranges().size() > 2 ? node.free.ports.ranges().size() * 8 : 0;
  }
  bytes += node_by_name_.capacity() * (sizeof(std::string) + sizeof(NodeId) + 1);
  bytes += job_by_id_.capacity() * (sizeof(std::string) + sizeof(JobSlot) + 1);
  for (const JobState& job : jobs_) {
    bytes += job.tasks.capacity() * sizeof(PlacedTask);
    bytes += job.request.roles.capacity() * sizeof(RoleRequest);
    for (const std::string* s : {&job.request.id, &job.request.name, &job.request.user,
                                 &job.request.queue}) {
      if (s->size() > 15) bytes += s->capacity();
    }
  }
  // Pending set nodes: key plus red-black tree overhead.
  bytes += pending_count_ * (sizeof(PendingKey) + 32);
  // Index: one slot per node in a bucket plus key and position.
  bytes += index_.size() * (sizeof(int32_t) * 3);
  return bytes;
}

}  // namespace trainyard::core
