// The simulator's input as values: the nodes of a cluster and the jobs of a
// trace (each job one gang of tasks in one or more roles), independent of the
// file format they were read from. Readers for the Alibaba openb format and
// Trainyard's own CSV format fill these; see docs/sim.md for both formats.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/gpu_topology.h"
#include "core/state/job.h"

namespace trainyard::sim {

// A job that never ends by itself (its trace gives no end time).
inline constexpr int64_t kRunsForever = -1;

// Priority classes are the scheduler core's (one definition for the server
// and the simulator).
using core::PriorityClass;
using core::PriorityClassName;
using core::ParsePriorityClass;

// One node of the simulated cluster.
struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string gpu_model;  // "" when unknown
  std::string rack;       // "" when unknown
  // A GpuTopology spec ("switches=0-1,2-3;sockets=0-3"); "" = the default
  // topology for the node's GPU count (see DefaultTopologySpec).
  std::string topology;
  int line = 0;  // where it was read; 0 for generated nodes
};

struct NodeList {
  std::string source;
  std::vector<NodeSpec> nodes;
  // True when at least one node got the default topology for its GPU count
  // because its file gave none (the Alibaba trace carries no topology).
  bool topology_assumed = false;
};

// One role of a job: `count` identical tasks.
struct RoleSpec {
  std::string name = "task";
  int count = 1;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;            // whole GPUs per task, after rounding up shares
  int gpu_milli = 0;       // as the trace asked: < 1000 means a share of one GPU
  bool rounded_up = false; // true when a share of a GPU was rounded up to gpus
};

// One job: a gang whose tasks are all placed at once or not at all.
struct JobSpec {
  std::string name;
  std::string queue = "default";
  std::string user;
  PriorityClass priority = PriorityClass::kIteration;
  int64_t submit_s = 0;                 // simulated seconds
  int64_t duration_s = kRunsForever;    // run time once placed
  std::vector<RoleSpec> roles;
  std::vector<std::string> gpu_models;  // acceptable GPU models; empty = any
  int line = 0;                         // first line of the job in its file

  int TaskCount() const;
  int64_t GpuCount() const;
};

struct Trace {
  std::string source;
  std::string format;  // "alibaba-openb", "trainyard" or "synthetic"
  std::vector<JobSpec> jobs;  // in submit order (ties keep file order)
  int64_t task_count = 0;
  // Tasks that asked for a share of one GPU (gpu_milli < 1000) and were
  // rounded up to a whole GPU.
  int64_t rounded_up_tasks = 0;
};

// The topology assumed for a node whose file gives none (one home, in core:
// `trainyard up` simulates the same).
using core::DefaultTopologySpec;

}  // namespace trainyard::sim
