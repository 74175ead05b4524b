// The discrete-event simulator: replays a trace through the scheduler core
// on a simulated clock (no sleeps). Events are job arrivals, job
// completions and the end of a preemption victim's grace period; after the
// events of one instant the scheduler runs one round, and its placements
// and preemptions become future events. Measures what SimReport holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/policy/queue_config.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace trainyard::sim {

struct SimOptions {
  std::string queue_policy = "fifo";   // as core::SchedulerOptions
  std::string placement = "topology";
  // The queue tree; by default one leaf per queue the trace names, sharing
  // the cluster equally (see QueuesForTrace).
  std::optional<core::QueuesConfig> queues;
  int64_t reservation_wait_s = 300;
  int64_t preemption_grace_s = 30;
  // As core::SchedulerOptions::preemption_min_runtime; 0 = off.
  int64_t preemption_min_runtime_s = 0;
  bool enable_preemption = true;
  // Ignore the trace's end times: every job runs until the end, so the
  // arrivals fill the cluster (the setup of the Alibaba openb paper, which
  // compares placements by how much they pack before jobs must wait).
  bool fill = false;
  uint64_t seed = 1;
  // How many unschedulable and still-pending jobs the report lists by name.
  size_t listed_jobs = 10;
  // A guard against preemption cycles: the run stops with an error after
  // this many scheduling rounds. 0 = 20 per job + 1000.
  int64_t max_rounds = 0;
};

// Replays `trace` on `nodes`. Jobs that can never fit the cluster are
// reported unschedulable with their reason, not given to the scheduler.
// Errors: unknown policy names or an invalid queue tree (the core's
// message), a node whose topology does not parse, the round limit.
absl::StatusOr<SimReport> Simulate(const NodeList& nodes, const Trace& trace,
                                   const SimOptions& options);

}  // namespace trainyard::sim
