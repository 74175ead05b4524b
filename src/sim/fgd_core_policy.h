// The server's own placement in the FGD protocol (fgd_protocol.h): policy
// "core:NAME" hands each arriving task to a scheduler core (core::Scheduler
// with placement policy NAME, FIFO, no preemption) as a one-task job built
// as the simulator builds jobs (ToCoreJob), runs one scheduling round, and
// takes the node and GPUs the core committed; a task the round leaves
// pending is withdrawn and fails for good, as the protocol wants. So the
// protocol measures what `trainyard server` does, on the same pod sequences
// as its baselines.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/scheduler/scheduler.h"
#include "sim/fgd_policies.h"
#include "sim/trace.h"

namespace trainyard::sim {

// The prefix that names a core placement policy ("core:fragmentation").
inline constexpr char kCorePolicyPrefix[] = "core:";
// "trainyard": Trainyard's placement, the server's default, which is
// "core:fragmentation" (the simulator's policy of its own is retired).
inline constexpr char kTrainyardPolicy[] = "trainyard";

// True when `name` starts with kCorePolicyPrefix, or is kTrainyardPolicy.
bool IsCorePolicy(const std::string& name);

// The core placement policy a core policy name runs: "fragmentation" for
// "core:fragmentation" and for "trainyard". REQUIRES: IsCorePolicy(name).
std::string CorePlacementOf(const std::string& name);

// A core::Scheduler with placement CorePlacementOf(name), FIFO, no
// preemption, no reservations, holding every node of `nodes` with
// everything free. Errors: as MakeCorePolicy's.
absl::StatusOr<std::unique_ptr<core::Scheduler>> MakeCoreScheduler(const std::string& name, uint64_t seed,
                                                                    const NodeList& nodes, const Trace& trace);

// A ProtoPolicy over a fresh core::Scheduler holding every node of `nodes`
// (in order: ProtoChoice::node is the index into nodes.nodes). Each task
// must carry the index of its job in `trace` (ProtoTask::job). `seed`
// breaks ties among equal nodes. Errors: a placement name the core does not
// know (core::MakePlacementPolicy's message), a node the core refuses.
// REQUIRES: nodes and trace outlive the policy.
absl::StatusOr<std::unique_ptr<ProtoPolicy>> MakeCorePolicy(const std::string& name, uint64_t seed,
                                                           const NodeList& nodes,
                                                           const Trace& trace);

}  // namespace trainyard::sim
