// Conversions from simulator input to scheduler-core values, and the
// never-fits check; see cluster_build.h.
#include "sim/cluster_build.h"

#include <algorithm>
#include <cmath>

#include "absl/container/btree_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::sim {

absl::StatusOr<core::NodeSpec> ToCoreNode(const NodeSpec& node, const std::string& source) {
  std::string spec = node.topology.empty() ? DefaultTopologySpec(node.gpus) : node.topology;
  auto topo = core::GpuTopology::FromSpec(spec);
  if (!topo.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", node.line, ": field 'topology': ",
                                                   topo.status().message()));
  }
  if (topo->gpu_count() != node.gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", node.line, ": field 'topology': '", spec, "' has ",
                     topo->gpu_count(), " GPUs but the node has ", node.gpus));
  }
  core::NodeSpec out;
  out.name = node.name;
  out.rack = node.rack;
  if (!node.gpu_model.empty()) out.labels.push_back({"gpu_model", node.gpu_model});
  out.gpu_model = node.gpu_model;
  out.capacity.memory_mb = node.memory_mib;
  out.capacity.vcores_milli = node.cpu_milli;
  out.capacity.gpus = node.gpus;
  out.topology = *std::move(topo);
  return out;
}

core::JobRequest ToCoreJob(const JobSpec& job, absl::Time submit) {
  core::JobRequest out;
  out.id = job.name;
  out.name = job.name;
  out.user = job.user;
  out.queue = job.queue;
  out.priority = job.priority;
  out.submit_time = submit;
  for (const RoleSpec& role : job.roles) {
    core::RoleRequest r;
    r.name = role.name;
    r.count = role.count;
    r.resource.memory_mb = role.memory_mib;
    r.resource.vcores_milli = role.cpu_milli;
    // A share of one GPU is a share: the scheduler packs shares onto a GPU.
    if (role.rounded_up && role.gpus == 1 && role.gpu_milli > 0) {
      r.resource.gpu_milli = role.gpu_milli;
    } else {
      r.resource.gpus = role.gpus;
    }
    r.gpu_models = job.gpu_models;
    out.roles.push_back(std::move(r));
  }
  return out;
}

core::QueuesConfig QueuesForTrace(const Trace& trace) {
  absl::btree_set<std::string> names;
  for (const JobSpec& job : trace.jobs) names.insert(job.queue);
  if (names.empty() || (names.size() == 1 && *names.begin() == "default")) {
    return core::DefaultQueues();
  }
  core::QueuesConfig config;
  // Rounded down to 0.01 % so the shares never sum above 100.
  double share = std::floor(10000.0 / static_cast<double>(names.size())) / 100.0;
  for (const std::string& name : names) {
    config.root.children.push_back(
        core::QueueConfig{.name = name, .capacity_percent = share, .max_capacity_percent = 100});
  }
  return config;
}

core::AllocationLimits LimitsForNodes(const NodeList& nodes) {
  core::AllocationLimits limits;
  limits.max_gpus = core::kMaxGpus;
  for (const NodeSpec& n : nodes.nodes) {
    limits.max_memory_mb = std::max(limits.max_memory_mb, n.memory_mib);
    limits.max_vcores_milli = std::max(limits.max_vcores_milli, n.cpu_milli);
  }
  return limits;
}

FeasibilityCheck::FeasibilityCheck(const NodeList& nodes) {
  for (const NodeSpec& n : nodes.nodes) {
    auto same = [&](const Shape& s) {
      return s.model == n.gpu_model && s.gpus == n.gpus && s.cpu_milli == n.cpu_milli &&
             s.memory_mib == n.memory_mib;
    };
    auto it = std::find_if(shapes_.begin(), shapes_.end(), same);
    if (it == shapes_.end()) {
      shapes_.push_back(Shape{n.gpu_model, n.gpus, n.cpu_milli, n.memory_mib, 0, n.name});
      it = shapes_.end() - 1;
    }
    it->count += 1;
  }
}

std::string FeasibilityCheck::Unschedulable(const JobSpec& job) const {
  auto model_ok = [&](const Shape& s) {
    return job.gpu_models.empty() ||
           std::find(job.gpu_models.begin(), job.gpu_models.end(), s.model) != job.gpu_models.end();
  };
  const Shape* largest = nullptr;
  int64_t cluster_gpus = 0;
  for (const Shape& s : shapes_) {
    if (!model_ok(s)) continue;
    cluster_gpus += s.count * s.gpus;
    if (largest == nullptr || s.gpus > largest->gpus) largest = &s;
  }
  if (largest == nullptr) {
    return absl::StrCat("needs GPU model ", absl::StrJoin(job.gpu_models, " or "),
                        "; no node has it");
  }
  for (const RoleSpec& role : job.roles) {
    if (role.gpus > largest->gpus) {
      return absl::StrCat("role ", role.name, " needs ", role.gpus,
                          " GPUs per task; the largest node", job.gpu_models.empty() ? "" : " of its GPU models",
                          " has ", largest->gpus, " GPUs (", largest->example, ")");
    }
    bool fits = std::any_of(shapes_.begin(), shapes_.end(), [&](const Shape& s) {
      return model_ok(s) && s.gpus >= role.gpus && s.cpu_milli >= role.cpu_milli &&
             s.memory_mib >= role.memory_mib;
    });
    if (!fits) {
      return absl::StrCat("role ", role.name, " needs ", role.gpus, " GPUs, ", role.cpu_milli,
                          " millicores and ", role.memory_mib,
                          " MiB per task; no node has that much of all three");
    }
  }
  if (job.GpuCount() > cluster_gpus) {
    return absl::StrCat("needs ", job.GpuCount(), " GPUs in all; the cluster has ", cluster_gpus,
                        job.gpu_models.empty() ? "" : " of its GPU models");
  }
  return "";
}

}  // namespace trainyard::sim
