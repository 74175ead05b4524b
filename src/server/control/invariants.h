// The control state's invariants, checked by the event-order property test
// and the control-state fuzzer (control_harness.h) after every event, and by
// tests that drive ControlState: every task is in exactly one place
// (pending, live on one node, or ended), the scheduler core holds exactly
// the live tasks the records place (same node, same GPUs), no GPU is given
// twice, and a node's free resources are its capacity less its tasks and the
// GPUs out of service the server asked for. Reads only; O(tasks + nodes).
#pragma once

#include "absl/status/status.h"
#include "core/state/cluster_state.h"
#include "server/control/job_map.h"
#include "server/control/node_table.h"

namespace trainyard::server {

// OK, or Internal naming the first invariant broken.
absl::Status CheckControlInvariants(const JobMap& jobs, const NodeTable& nodes, const core::ClusterState& cs);

}  // namespace trainyard::server
