// The placement policies of the FGD protocol (fgd_protocol.h), over a small
// node model of their own: CPU, memory, the free share of each GPU and the
// GPU model. Baselines as the FGD artifact defines them (first fit, best fit
// by its leftover score, seeded random) and the FGD rule itself, as an exact
// sum and as its published code scores it. Trainyard's own placement runs
// through the scheduler core (fgd_core_policy.h), not here.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/policy/fragmentation.h"
#include "core/resources/gpu_topology.h"

namespace trainyard::sim {

struct ProtoNode {
  int64_t cpu_capacity = 0;
  int64_t memory_free = 0;
  const core::GpuTopology* topology = nullptr;
  core::FragNode frag;  // free CPU, model, free share per GPU
};

struct ProtoTask {
  core::TaskShape shape;
  int64_t memory_mib = 0;
  int32_t job = -1;  // index of the task's job in the trace; -1 = none
};

struct ProtoChoice {
  int32_t node = -1;
  core::GpuPick pick;
};

class ProtoPolicy {
 public:
  virtual ~ProtoPolicy() = default;
  // Called once per task as it arrives, before Choose.
  virtual void Arrived(const ProtoTask& task) { (void)task; }
  // Where `task` goes, or false when it fits nowhere.
  virtual bool Choose(const std::vector<ProtoNode>& nodes, const ProtoTask& task,
                      ProtoChoice* out) = 0;
  // Called after node n changed (the chosen node, once placed).
  virtual void Changed(int32_t n) { (void)n; }
};

// The published FGD code's node score for a placement: the drop in the
// node's expected fragmentation, in GPUs (sums as ShapeDistribution::
// FragmentationSum over `tasks` counted tasks, thousandths), through the
// logistic function, times 100, rounded down to an integer (0..100): 50
// when fragmentation does not change, more when it falls. Placements
// within ~0.02 GPU of one another score the same. 50 when tasks <= 0.
int64_t FgdIntegerScore(int64_t before_sum, int64_t after_sum, int64_t tasks);

// True when `task` fits on `node` (memory, CPU, model, GPUs).
bool TaskFits(const ProtoNode& node, const ProtoTask& task);

// A policy by name: "first-fit", "best-fit", "random", "fgd", "fgd-int"
// (FGD as its published code scores: FgdIntegerScore, seeded random
// tie-break). `workload` is every task of the run: fgd and fgd-int weigh
// fragmentation by its shapes (the artifact's setup: the shapes a cluster
// has seen in its history). Errors: an unknown name, listing the known ones
// (core policies and "trainyard" are made by MakeCorePolicy).
absl::StatusOr<std::unique_ptr<ProtoPolicy>> MakeProtoPolicy(const std::string& name,
                                                            uint64_t seed,
                                                            const std::vector<ProtoTask>& workload);

}  // namespace trainyard::sim
