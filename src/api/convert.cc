// Wire <-> core conversions.
#include "api/convert.h"

#include "api/gpu_model.h"
#include "api/restart_budgets.h"
#include "api/roles.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trainyard::api {

core::Resource ToCore(const v1::Resource& r) {
  core::Resource c;
  c.memory_mb = r.memory_mb();
  c.vcores_milli = r.vcores_milli();
  c.gpus = r.gpus();
  c.gpu_mask = r.gpu_mask();
  c.port_count = r.port_count();
  c.gpu_milli = r.gpu_milli();
  c.gpu_memory_mb = r.gpu_memory_mb();
  for (const auto& p : r.ports()) {
    if (p.begin() >= core::kMinPort && p.begin() <= p.end() && p.end() <= core::kMaxPort) {
      c.ports.Add({p.begin(), p.end()});
    }
  }
  return c;
}

v1::Resource ToProto(const core::Resource& r) {
  v1::Resource p;
  p.set_memory_mb(r.memory_mb);
  p.set_vcores_milli(r.vcores_milli);
  p.set_gpus(r.gpus);
  p.set_gpu_mask(r.gpu_mask);
  p.set_port_count(r.port_count);
  p.set_gpu_milli(r.gpu_milli);
  p.set_gpu_memory_mb(r.gpu_memory_mb);
  for (const auto& range : r.ports.ranges()) {
    auto* pr = p.add_ports();
    pr->set_begin(range.begin);
    pr->set_end(range.end);
  }
  return p;
}

absl::StatusOr<core::GpuTopology> ToCore(const v1::GpuTopology& t) {
  core::GpuGroups groups{.gpu_count = t.gpu_count()};
  for (uint64_t g : t.switches()) groups.switches.push_back(core::GpuSet(g));
  for (uint64_t g : t.sockets()) groups.sockets.push_back(core::GpuSet(g));
  for (uint64_t g : t.nvlink_islands()) groups.nvlink_islands.push_back(core::GpuSet(g));
  return core::GpuTopology::FromGroups(std::move(groups));
}

v1::GpuTopology ToProto(const core::GpuTopology& t) {
  v1::GpuTopology p;
  p.set_gpu_count(t.gpu_count());
  for (auto g : t.switches()) p.add_switches(g.bits());
  for (auto g : t.sockets()) p.add_sockets(g.bits());
  for (auto g : t.nvlink_islands()) p.add_nvlink_islands(g.bits());
  return p;
}

core::PriorityClass ToCore(v1::PriorityClass p) {
  switch (p) {
    case v1::PRIORITY_PRODUCTION: return core::PriorityClass::kProduction;
    case v1::PRIORITY_PTR: return core::PriorityClass::kPtr;
    default: return core::PriorityClass::kIteration;
  }
}

absl::StatusOr<core::JobRequest> ToJobRequest(const v1::JobRecord& job) {
  const v1::JobSpec& spec = job.spec();
  core::LabelSelector selector;
  for (const auto& [key, value] : spec.node_selector()) {
    std::string text = absl::StartsWith(value, "in (") || absl::StartsWith(value, "notin (")
                           ? absl::StrCat(key, " ", value)
                           : absl::StrCat(key, "=", value);
    auto one = core::LabelSelector::Parse(text);
    if (!one.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("nodeSelector.", key, ": ", one.status().message()));
    }
    for (const auto& r : one->requirements()) selector.Add(r);
  }
  core::JobRequest req;
  req.id = job.name();
  req.name = job.name();
  req.user = spec.user();
  req.queue = spec.queue().empty() ? "default" : spec.queue();
  req.priority = ToCore(spec.priority());
  req.submit_time = absl::FromUnixMillis(job.submit_time_ms());
  req.checkpoints = HasJobMaster(spec);  // it can be asked to save before it is stopped
  req.last_preemption = PreemptionWouldEnd(job);
  req.elastic = IsElastic(spec);
  for (const auto& rs : spec.replicas()) {
    core::RoleRequest role;
    role.name = rs.role();
    role.count = rs.count();
    role.min_available = rs.min_count() > 0 ? rs.min_count() : rs.min_available() > 0 ? rs.min_available() : -1;
    role.resource = ToCore(rs.resources());
    for (const std::string& m : rs.resources().gpu_models()) role.gpu_models.push_back(CanonicalGpuModel(m));
    role.node_selector = selector;
    role.node_name = spec.node_name();
    role.rack = spec.rack();
    role.relax = spec.relax_locality();
    req.roles.push_back(std::move(role));
  }
  return req;
}

absl::StatusOr<core::NodeSpec> ToNodeSpec(const v1::NodeInfo& info) {
  core::NodeSpec n;
  n.name = info.name();
  n.rack = info.rack();
  for (const auto& [k, v] : info.labels()) n.labels.emplace_back(k, v);
  std::sort(n.labels.begin(), n.labels.end());
  n.capacity = ToCore(info.capacity());
  n.gpu_model = CanonicalGpuModel(info.gpu_model());
  n.gpu_memory_mb = info.gpu_memory_mb();
  absl::StatusOr<core::GpuTopology> topology = ToCore(info.topology());
  if (!topology.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", info.name(), ": topology.", topology.status().message()));
  }
  n.topology = *std::move(topology);
  if (n.topology.gpu_count() != n.capacity.gpus) {
    return absl::InvalidArgumentError(absl::StrCat("node ", info.name(), ": topology has ",
                                                   n.topology.gpu_count(), " GPUs but capacity says ",
                                                   n.capacity.gpus));
  }
  return n;
}

std::string TaskName(const std::string& job, const std::string& role, int index) {
  return absl::StrCat(job, "-", role, "-", index);
}

}  // namespace trainyard::api
