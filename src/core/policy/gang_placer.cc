// Gang placement over the NodeIndex; see gang_placer.h.
#include "core/policy/gang_placer.h"

#include <algorithm>
#include <numeric>

#include "core/policy/gpu_fit.h"

namespace trainyard::core {

struct GangPlacer::RoleContext {
  JobSlot job = -1;
  int32_t role_index = 0;
  const RoleRequest* role = nullptr;
  int32_t rack = -1;       // required rack index; -1 = any
  bool rack_unknown = false;
  int32_t rack_hint = -1;  // rack of the job's first node
  bool blocked_by_reservation = false;
};

namespace {

int32_t RackIndex(const ClusterState& state, const std::string& rack) {
  const std::vector<std::string>& racks = state.racks();
  for (size_t i = 0; i < racks.size(); ++i) {
    if (racks[i] == rack) return static_cast<int32_t>(i);
  }
  return -1;
}

// A deterministic hash of the seed and where the scan is (splitmix64).
uint64_t Mix(uint64_t seed, uint64_t key, uint64_t size) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (key * 131 + size + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Ports for one task on `node`, or false: exact ports from those open (not
// held, not in use on the node), the rest lowest first from those spare
// (open and not cooling).
bool ChoosePorts(const Resource& want, const NodePorts& node, PortRanges* out) {
  PortRanges ports;
  std::optional<PortRanges> extra;
  if (!want.ports.Empty()) {
    if (!node.open.ContainsAll(want.ports)) return false;
    ports = want.ports;
    if (want.port_count > 0) {
      extra = node.spare.Subtract(want.ports).TakeLowest(static_cast<uint32_t>(want.port_count));
    }
  } else if (want.port_count > 0) {
    extra = node.spare.TakeLowest(static_cast<uint32_t>(want.port_count));
  }
  if (want.port_count > 0) {
    if (!extra.has_value()) return false;
    ports = ports.Union(*extra);
  }
  *out = std::move(ports);
  return true;
}

}  // namespace

int GangPlacer::TasksFitting(const RoleContext& ctx, NodeId n) const {
  const Resource& want = ctx.role->resource;
  const Resource& free = state_->node(n).free;
  int fit = 64;
  if (want.memory_mb > 0) fit = std::min<int64_t>(fit, free.memory_mb / want.memory_mb);
  if (want.vcores_milli > 0) fit = std::min<int64_t>(fit, free.vcores_milli / want.vcores_milli);
  if (want.gpus > 0) fit = std::min(fit, free.gpus / want.gpus);
  if (want.IsGpuShare()) {
    fit = std::min(fit, SharesFitting(state_->node(n), want.gpu_milli, want.gpu_memory_mb));
  }
  if (want.gpu_mask != 0 || !want.ports.Empty()) fit = std::min(fit, 1);
  if (want.port_count > 0) {
    fit = std::min<int64_t>(fit, state_->ports(n).spare.Count() / want.port_count);
  }
  return fit;
}

bool GangPlacer::FitsOneTask(JobSlot j, const RoleRequest& role, NodeId n,
                             bool ignore_reservations) const {
  const NodeState& node = state_->node(n);
  if (!node.present || !node.schedulable) return false;
  if (!ignore_reservations && node.reserved_for >= 0 && node.reserved_for != j) return false;
  if (!role.node_name.empty() && !role.relax && node.name != role.node_name) return false;
  if (!role.rack.empty() && (node.rack < 0 || state_->racks()[node.rack] != role.rack)) {
    return false;
  }
  if (!role.node_selector.Empty() && !role.node_selector.Matches(state_->labels(n))) return false;
  if (!state_->ModelAllows(role, n)) return false;
  const Resource& want = role.resource;
  if (node.free.memory_mb < want.memory_mb || node.free.vcores_milli < want.vcores_milli) {
    return false;
  }
  if (!GpusFit(n, want)) return false;
  PortRanges ports;
  return (want.ports.Empty() && want.port_count == 0) || ChoosePorts(want, state_->ports(n), &ports);
}

bool GangPlacer::NodeOk(RoleContext& ctx, NodeId n, int tasks) {
  const NodeState& node = state_->node(n);
  if (!node.present || !node.schedulable) return false;
  const RoleRequest& role = *ctx.role;
  if (ctx.rack >= 0 && node.rack != ctx.rack) return false;
  if (!role.node_selector.Empty() && !role.node_selector.Matches(state_->labels(n))) return false;
  if (!state_->ModelAllows(role, n)) return false;
  if (TasksFitting(ctx, n) < tasks) return false;
  // Exact ports held by another task or in use on the node rule it out
  // here, so the search moves on instead of PlaceTask failing on it.
  if (!role.resource.ports.Empty() && !state_->ports(n).open.ContainsAll(role.resource.ports)) {
    return false;
  }
  if (node.reserved_for >= 0 && node.reserved_for != ctx.job) {
    ctx.blocked_by_reservation = true;
    return false;
  }
  return tasks != 1 || GpusFit(n, role.resource);
}

bool GangPlacer::GpusFit(NodeId n, const Resource& want) const {
  const NodeState& node = state_->node(n);
  if (want.IsGpuShare()) {
    return FitShare(state_->topology(n), node, want.gpu_milli, want.gpu_memory_mb) >= 0;
  }
  GpuFit fit;
  return FitGpus(state_->topology(n), GpuSet(node.free.gpu_mask), want.gpus, want.gpu_mask,
                 Tightness::kNode, &fit);
}

bool GangPlacer::ChooseGpus(NodeId n, const Resource& want, Resource* alloc) const {
  const NodeState& node = state_->node(n);
  if (want.IsGpuShare()) {
    int g = FitShare(state_->topology(n), node, want.gpu_milli, want.gpu_memory_mb);
    if (g < 0) return false;
    alloc->gpu_mask = uint64_t{1} << g;
    alloc->gpu_milli = want.gpu_milli;
    alloc->gpu_memory_mb = want.gpu_memory_mb;
    return true;
  }
  GpuFit fit;
  if (!FitGpus(state_->topology(n), GpuSet(node.free.gpu_mask), want.gpus, want.gpu_mask,
               Tightness::kNode, &fit)) {
    return false;
  }
  alloc->gpus = fit.gpus.Count();
  alloc->gpu_mask = fit.gpus.bits();
  return true;
}

bool GangPlacer::PlaceTask(RoleContext& ctx, NodeId n, int32_t index) {
  const NodeState& node = state_->node(n);
  const Resource& want = ctx.role->resource;
  if (node.free.memory_mb < want.memory_mb || node.free.vcores_milli < want.vcores_milli) {
    return false;
  }
  Resource alloc{.memory_mb = want.memory_mb, .vcores_milli = want.vcores_milli};
  if (!ChooseGpus(n, want, &alloc)) return false;
  if ((!want.ports.Empty() || want.port_count > 0) &&
      !ChoosePorts(want, state_->ports(n), &alloc.ports)) {
    return false;
  }
  state_->AllocateTask(ctx.job, ctx.role_index, index, n, alloc);
  if (std::find(job_nodes_.begin(), job_nodes_.end(), n) == job_nodes_.end()) {
    job_nodes_.push_back(n);
    if (ctx.rack_hint < 0) ctx.rack_hint = node.rack;
  }
  return true;
}

std::optional<NodeId> GangPlacer::FindInRack(RoleContext& ctx, int remaining) {
  if (ctx.rack_hint < 0 || (ctx.rack >= 0 && ctx.rack != ctx.rack_hint)) return std::nullopt;
  std::optional<NodeId> best;
  int best_tasks = 0;
  int best_free = 0;
  for (NodeId n : state_->rack_nodes(ctx.rack_hint)) {
    if (!state_->index().Contains(n) || !NodeOk(ctx, n, 1)) continue;
    int tasks = std::min(remaining, TasksFitting(ctx, n));
    int free = state_->node(n).free.gpus;
    if (tasks > best_tasks || (tasks == best_tasks && free < best_free)) {
      best = n;
      best_tasks = tasks;
      best_free = free;
    }
  }
  return best;
}

bool GangPlacer::Offer(RoleContext& ctx, NodeId n, int tasks, Pick* pick) {
  if (!NodeOk(ctx, n, tasks)) return false;
  if (!policy_->ScoresNodes()) {
    pick->node = n;
    return true;
  }
  int32_t model = state_->node(n).gpu_model;
  if (model >= 0 && model < 63) models_seen_ |= uint64_t{1} << model;
  if (!scored_.insert(policy_->CostKey(*state_, n, *ctx.role)).second) {
    ++pick->repeats;
    return false;
  }
  pick->repeats = 0;
  int64_t cost = policy_->PlacementCost(*state_, n, *ctx.role);
  if (!pick->node.has_value() || cost < pick->cost) {
    pick->node = n;
    pick->cost = cost;
  }
  return false;
}

bool GangPlacer::OfferBucket(RoleContext& ctx, const std::vector<int32_t>& nodes, size_t start,
                             int tasks, Pick* pick) {
  pick->repeats = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (Offer(ctx, nodes[(start + i) % nodes.size()], tasks, pick)) return true;
    if (pick->repeats >= PlacementPolicy::kRepeatRun && (models_wanted_ & ~models_seen_) == 0) {
      return false;
    }
  }
  return false;
}

std::optional<NodeId> GangPlacer::FindInBuckets(RoleContext& ctx, int tasks) {
  const Resource& want = ctx.role->resource;
  int gpus = want.gpu_mask != 0 ? GpuSet(want.gpu_mask).Count() : want.gpus;
  int bucket_gpus = gpus * tasks;
  Pick pick;
  scored_.clear();
  models_seen_ = 0;
  models_wanted_ = 0;
  if (policy_->ScoresNodes()) {
    uint64_t allowed = state_->ModelMask(*ctx.role);
    const std::vector<int64_t>& free = state_->ModelFreeShare();
    for (size_t m = 0; m < free.size() && m < 63; ++m) {
      if (free[m] > 0 && (allowed == 0 || ((allowed >> m) & 1) != 0)) models_wanted_ |= uint64_t{1} << m;
    }
  }
  if (want.IsGpuShare()) {
    // One share packs onto a split GPU first: the share index's keys are
    // the largest free share of a node's split GPUs, so ascending from the
    // request is best fit. Several shares look for whole free GPUs enough
    // for them all, so a gang of shares stays on few nodes.
    if (tasks == 1) {
      const NodeIndex::Buckets& shares = state_->share_index().buckets();
      for (auto it = shares.lower_bound(want.gpu_milli); it != shares.end(); ++it) {
        if (OfferBucket(ctx, it->second, 0, tasks, &pick)) return pick.node;
      }
    }
    bucket_gpus = (tasks * want.gpu_milli + 999) / 1000;
  }
  policy_->CandidateBuckets(state_->index(), bucket_gpus, &keys_);
  const NodeIndex::Buckets& buckets = state_->index().buckets();
  for (NodeIndex::Key key : keys_) {
    auto it = buckets.find(key);
    if (it == buckets.end()) continue;
    const std::vector<int32_t>& nodes = it->second;
    size_t start = seed_ == 0 ? 0 : Mix(seed_, key, nodes.size()) % nodes.size();
    if (OfferBucket(ctx, nodes, start, tasks, &pick)) return pick.node;
  }
  return pick.node;
}

std::optional<NodeId> GangPlacer::FindNode(RoleContext& ctx, int remaining) {
  const RoleRequest& role = *ctx.role;
  if (!role.node_name.empty()) {
    std::optional<NodeId> named = state_->FindNode(role.node_name);
    if (named.has_value() && state_->index().Contains(*named) && NodeOk(ctx, *named, 1)) {
      return named;
    }
    if (!role.relax) return std::nullopt;
  }
  for (NodeId n : job_nodes_) {
    if (NodeOk(ctx, n, 1)) return n;
  }
  if (std::optional<NodeId> n = FindInRack(ctx, remaining)) return n;
  int per_task = std::max(1, role.resource.gpus);
  int most = role.resource.gpu_mask != 0 ? 1 : std::min(remaining, kMaxGpus / per_task);
  for (int k = most; k >= 1; --k) {
    if (std::optional<NodeId> n = FindInBuckets(ctx, k)) return n;
  }
  return std::nullopt;
}

PlaceResult GangPlacer::Place(JobSlot j) {
  PlaceResult result;
  const JobRequest& job = state_->job(j).request;
  std::vector<int32_t> order(job.roles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return job.roles[a].resource.gpus > job.roles[b].resource.gpus;
  });
  job_nodes_.clear();
  int32_t rack_hint = -1;
  for (int32_t r : order) {
    RoleContext ctx{.job = j, .role_index = r, .role = &job.roles[r], .rack_hint = rack_hint};
    if (!ctx.role->rack.empty()) ctx.rack = RackIndex(*state_, ctx.role->rack);
    int32_t placed = 0;
    bool rack_ok = ctx.role->rack.empty() || ctx.rack >= 0;
    while (rack_ok && placed < ctx.role->count) {
      std::optional<NodeId> n = FindNode(ctx, ctx.role->count - placed);
      if (!n.has_value()) break;
      int before = placed;
      while (placed < ctx.role->count && PlaceTask(ctx, *n, placed)) ++placed;
      if (placed == before) break;
    }
    rack_hint = ctx.rack_hint;
    result.blocked_by_reservation |= ctx.blocked_by_reservation;
    if (placed < ctx.role->MinAvailable()) {
      state_->ReleaseAllTasks(j);
      result.short_role = r;
      result.short_placed = placed;
      return result;
    }
  }
  result.placed = true;
  result.nodes = job_nodes_;
  return result;
}

PlaceResult GangPlacer::PlaceOne(JobSlot j, int32_t role, int32_t index) {
  PlaceResult result;
  const JobState& job = state_->job(j);
  RoleContext ctx{.job = j, .role_index = role, .role = &job.request.roles[role]};
  if (!ctx.role->rack.empty()) ctx.rack = RackIndex(*state_, ctx.role->rack);
  // The job's live tasks' nodes come first, as for the rest of a gang.
  job_nodes_.clear();
  for (const PlacedTask& t : job.tasks) {
    if (t.node < 0 || std::find(job_nodes_.begin(), job_nodes_.end(), t.node) != job_nodes_.end()) {
      continue;
    }
    job_nodes_.push_back(t.node);
    if (ctx.rack_hint < 0) ctx.rack_hint = state_->node(t.node).rack;
  }
  std::optional<NodeId> n;
  if (ctx.role->rack.empty() || ctx.rack >= 0) n = FindNode(ctx, 1);
  result.blocked_by_reservation = ctx.blocked_by_reservation;
  if (!n.has_value() || !PlaceTask(ctx, *n, index)) {
    result.short_role = role;
    return result;
  }
  result.placed = true;
  result.nodes = {*n};
  return result;
}

}  // namespace trainyard::core
