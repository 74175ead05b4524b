// Helpers for scheduler tests: small clusters of 8-GPU nodes (two sockets,
// four PCIe switches of two GPUs) and jobs of identical tasks.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/scheduler/scheduler.h"

namespace trainyard::core::testing {

inline constexpr char kEightGpuTopology[] = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7";

// An 8-GPU node "node-<i>" in rack "rack-<i / per_rack>".
inline NodeSpec EightGpuNode(int i, int per_rack = 4, std::string labels = "") {
  NodeSpec n;
  n.name = absl::StrCat("node-", i);
  n.rack = absl::StrCat("rack-", i / per_rack);
  n.labels = ParseLabels(labels).value();
  n.capacity = Resource{.memory_mb = 512 * 1024, .vcores_milli = 64000, .gpus = 8};
  n.capacity.ports = PortRanges::Of(30000, 30999).value();
  n.topology = GpuTopology::FromSpec(kEightGpuTopology).value();
  return n;
}

inline absl::Time T(int seconds) { return absl::UnixEpoch() + absl::Seconds(seconds); }

struct JobArgs {
  int tasks = 1;
  int gpus = 1;
  int min_available = -1;
  std::string queue = "default";
  std::string user = "alice";
  PriorityClass priority = PriorityClass::kIteration;
  int submit = 0;  // seconds after the epoch
  std::string selector;
  std::string node;
  bool relax = false;
  int64_t memory_mb = 1024;
};

inline JobRequest MakeJob(const std::string& id, const JobArgs& a) {
  JobRequest job;
  job.id = id;
  job.name = id;
  job.user = a.user;
  job.queue = a.queue;
  job.priority = a.priority;
  job.submit_time = T(a.submit);
  RoleRequest role;
  role.name = "worker";
  role.count = a.tasks;
  role.min_available = a.min_available;
  role.resource = Resource{.memory_mb = a.memory_mb, .vcores_milli = 1000, .gpus = a.gpus};
  role.node_selector = LabelSelector::Parse(a.selector).value();
  role.node_name = a.node;
  role.relax = a.relax;
  job.roles.push_back(role);
  return job;
}

// Reason given to job `id` in `d`, or "" when it is not pending.
inline std::string ReasonOf(const Decisions& d, const std::string& id) {
  for (const PendingReason& p : d.pending) {
    if (p.job_id == id) return p.reason;
  }
  return "";
}

inline const JobPlacement* PlacementOf(const Decisions& d, const std::string& id) {
  for (const JobPlacement& p : d.placements) {
    if (p.job_id == id) return &p;
  }
  return nullptr;
}

}  // namespace trainyard::core::testing
