// Generating the synthetic cluster and workload; see synthetic.h.
#include "sim/synthetic.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::sim {

absl::Status ValidateSynthetic(const SyntheticOptions& o) {
  auto bad = [](absl::string_view flag, int64_t v, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", v, " ", why));
  };
  if (o.nodes < 1 || o.nodes > 1000000) return bad("--synthetic-nodes", o.nodes, "is outside 1..1000000");
  if (o.gpus_per_node < 0 || o.gpus_per_node > 64) {
    return bad("--gpus-per-node", o.gpus_per_node, "is outside 0..64");
  }
  if (o.tasks < 1 || o.tasks > 10000000) return bad("--synthetic-tasks", o.tasks, "is outside 1..10000000");
  if (o.gang < 1 || o.gang > 100000) return bad("--gang", o.gang, "is outside 1..100000");
  if (o.gpus_per_task < 0) return bad("--gpus-per-task", o.gpus_per_task, "is negative");
  if (o.gpus_per_task > o.gpus_per_node) {
    return bad("--gpus-per-task", o.gpus_per_task,
               absl::StrCat("is above --gpus-per-node ", o.gpus_per_node));
  }
  return absl::OkStatus();
}

NodeList SyntheticNodes(const SyntheticOptions& o) {
  NodeList list;
  list.source = absl::StrCat("synthetic ", o.nodes, " x ", o.gpus_per_node, " GPUs");
  list.topology_assumed = true;
  list.nodes.reserve(o.nodes);
  for (int64_t i = 0; i < o.nodes; ++i) {
    NodeSpec n;
    n.name = absl::StrFormat("syn-node-%05d", i);
    n.cpu_milli = o.cpu_milli_per_node;
    n.memory_mib = o.memory_mib_per_node;
    n.gpus = o.gpus_per_node;
    list.nodes.push_back(std::move(n));
  }
  return list;
}

Trace SyntheticTrace(const SyntheticOptions& o) {
  Trace trace;
  trace.source = absl::StrCat("synthetic ", o.tasks, " tasks, gangs of ", o.gang, " x ",
                              o.gpus_per_task, " GPUs");
  trace.format = "synthetic";
  int per_node = o.gpus_per_node > 0 ? o.gpus_per_node : 1;
  int share = o.gpus_per_task > 0 ? o.gpus_per_task : 1;
  RoleSpec role;
  role.name = "worker";
  role.gpus = o.gpus_per_task;
  role.gpu_milli = o.gpus_per_task > 0 ? 1000 : 0;
  role.cpu_milli = o.cpu_milli_per_node / per_node * share;
  role.memory_mib = o.memory_mib_per_node / per_node * share;
  int64_t jobs = (o.tasks + o.gang - 1) / o.gang;
  trace.jobs.reserve(jobs);
  for (int64_t j = 0; j < jobs; ++j) {
    JobSpec job;
    job.name = absl::StrCat("syn-job-", j);
    role.count = static_cast<int>(std::min<int64_t>(o.gang, o.tasks - j * o.gang));
    job.roles.push_back(role);
    trace.jobs.push_back(std::move(job));
  }
  trace.task_count = o.tasks;
  return trace;
}

}  // namespace trainyard::sim
