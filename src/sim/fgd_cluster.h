// The cluster and tasks of the FGD protocol (fgd_protocol.h) and of the
// time replay (replay_protocol.h): the policies' small node model built from
// a node list, a trace's pods as their tasks, and a placement applied.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/gpu_topology.h"
#include "sim/fgd_policies.h"
#include "sim/trace.h"

namespace trainyard::sim {

// Bit of a model mask that no node has: a task naming only models absent
// from the cluster gets it, so it fits nowhere (0 would mean "any").
inline constexpr int kNoSuchModel = 63;

struct ProtoCluster {
  std::vector<ProtoNode> nodes;
  std::vector<std::unique_ptr<core::GpuTopology>> topologies;
  std::vector<std::string> models;  // GPU models by index (ProtoNode::frag.model)
  int64_t gpu_capacity = 0;         // thousandths of a GPU
};

// Every node of `list` with everything free. Errors: a bad topology (file
// and line named), more than 63 GPU models.
absl::StatusOr<ProtoCluster> BuildProtoCluster(const NodeList& list);

// Pod `job` (one task, the `index`-th job of its trace) as a task: a share
// when it asks under one GPU, its GPU models as a mask over `models`.
ProtoTask ToProtoTask(const JobSpec& job, int32_t index, const std::vector<std::string>& models);

// Takes what `t` holds from `node`, the GPUs as `pick` says.
void PlaceOn(ProtoNode& node, const ProtoTask& t, const core::GpuPick& pick);

}  // namespace trainyard::sim
