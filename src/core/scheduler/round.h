// Scheduler::Round: what one scheduling round carries between the files of
// the scheduler (internal).
#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "core/policy/gang_placer.h"
#include "core/policy/pending_reason.h"
#include "core/scheduler/scheduler.h"

namespace trainyard::core {

struct Scheduler::Round {
  absl::Time now;
  Decisions* out;
  GangPlacer placer;
  // Request signature -> why it failed; resources only shrink within a
  // round, so a later job with the same signature fails the same way.
  absl::flat_hash_map<std::string, Diagnosis> memo;
  int preemption_searches = 0;
};

// A time as the scheduler's reasons print it (UTC, to the second).
std::string TimeText(absl::Time t);

}  // namespace trainyard::core
