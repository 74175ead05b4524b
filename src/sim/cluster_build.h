// Turning the simulator's input values into the scheduler core's: nodes
// (with a topology, assumed by GPU count when the file gives none, and a
// gpu_model label), jobs (roles, priority, queue, gpu_model selector), the
// queue tree, and the check that finds jobs this cluster can never run, with
// the reason in words.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/policy/queue_config.h"
#include "core/resources/limits.h"
#include "core/state/cluster_state.h"
#include "core/state/job.h"
#include "sim/trace.h"

namespace trainyard::sim {

// The core's node for `node`. Errors name the node's file and line when its
// topology does not parse or disagrees with its GPU count.
absl::StatusOr<core::NodeSpec> ToCoreNode(const NodeSpec& node, const std::string& source);

// The core's job for `job`, submitted at `submit` (the simulated clock).
core::JobRequest ToCoreJob(const JobSpec& job, absl::Time submit);

// One leaf per queue the trace names, sharing the cluster equally (capacity
// 100/n %, max-capacity 100 %, weight 1); DefaultQueues() when the trace
// names only "default".
core::QueuesConfig QueuesForTrace(const Trace& trace);

// What the largest nodes offer, so no valid request is refused by the
// core's allocation limits before the simulator can explain it.
core::AllocationLimits LimitsForNodes(const NodeList& nodes);

// Answers "can this job ever run on this cluster, even when it is idle?".
class FeasibilityCheck {
 public:
  explicit FeasibilityCheck(const NodeList& nodes);
  // "" when every task of `job` fits some node of an acceptable GPU model
  // and the gang's GPUs fit the cluster's; otherwise why not, e.g. "role
  // worker needs 16 GPUs per task; the largest node has 8 GPUs".
  std::string Unschedulable(const JobSpec& job) const;

 private:
  struct Shape {
    std::string model;
    int gpus = 0;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    int64_t count = 0;
    std::string example;  // a node of this shape
  };
  std::vector<Shape> shapes_;
};

}  // namespace trainyard::sim
