// Choosing preemption victims for a job that does not fit: the fewest whole
// jobs (then the fewest that do not checkpoint, then the least GPU-time
// lost) among those a predicate allows, such that the job would then fit as
// a gang. A victim is always a whole job —
// every task of a gang goes — so no gang is ever left partly running.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "core/policy/gang_placer.h"
#include "core/state/cluster_state.h"

namespace trainyard::core {

struct VictimChoice {
  std::vector<JobSlot> victims;
  // Nodes the job would occupy once the victims are gone.
  std::vector<NodeId> nodes;
};

// Returns the victims that make room for pending job j, or nullopt when
// even every eligible job would not be enough. Only running jobs for which
// `eligible` is true are considered. The state is left as it was (the
// search places and releases tentatively). GPU-time lost is GPUs held times
// the time since the victim started, at `now`. Among sets with equally few
// jobs, jobs with JobBrief::checkpoints are preferred as victims.
std::optional<VictimChoice> ChooseVictims(ClusterState* state, GangPlacer* placer, JobSlot j,
                                          const std::function<bool(const JobBrief&)>& eligible,
                                          absl::Time now);

}  // namespace trainyard::core
