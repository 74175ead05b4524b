// Why a job cannot be placed, in words a person can act on: "needs 4 GPUs
// on one node; the most free on one node is 2 (node-17)", "no schedulable
// node matches gpu_model in (V100M16)", "waiting behind reservation for job
// big-1". This is the slow path: it looks at every node, so the scheduler
// calls it once per distinct request per round.
#pragma once

#include <string>

#include "core/policy/gang_placer.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

// Starts the reason of a job that can never fit the cluster's nodes as they
// are (even empty); the reason changes as soon as a node that could hold it
// registers.
inline constexpr char kUnschedulablePrefix[] = "unschedulable: ";

struct Diagnosis {
  std::string reason;
  // The job could fit if resources were freed (preemption or a
  // reservation may help); false when constraints rule out every node or
  // the request is larger than any matching node.
  bool resources_short = false;
};

// Diagnoses why `result.short_role` of job j could not be placed.
Diagnosis DiagnosePlacement(const ClusterState& state, const GangPlacer& placer, JobSlot j,
                            const PlaceResult& result);

// Diagnoses why one task of role `role` of job j found no node
// (GangPlacer::PlaceOne failed): the same reasons as a gang's, without the
// gang's count.
Diagnosis DiagnoseTask(const ClusterState& state, const GangPlacer& placer, JobSlot j,
                       int32_t role);

// "4 GPUs, 8192 MB memory, 2.5 vcores, 2 ports" (zero quantities left out).
std::string DescribeRequest(const Resource& r);

}  // namespace trainyard::core
