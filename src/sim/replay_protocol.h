// `trainyard sim --protocol replay`: job-level quality of placement policies.
// A pod list replayed in time, with arrivals and departures: each pod
// arrives at its creation time (divided by `arrival_scale`, so 1.3 is 130 %
// arrival rate), waits until a policy places it (a pod that does not fit
// lets later ones pass), runs for its duration once placed, and leaves.
// Policies are the FGD protocol's baselines (fgd_policies.h, over the
// protocol's node model), which take the waiting pods in arrival order, and
// the server's own placement, core:NAME (a core::Scheduler holding the
// waiting pods as pending one-task jobs, scheduled at each event time),
// which orders them as the server orders jobs: by priority class, then
// submit time. Reported per
// policy: queueing delay (placement time - arrival) mean, p95 and max over
// the pods placed, pods never placed by the end, and the GPU share
// allocated over time (time-weighted mean, and at evenly spaced times).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/trace.h"

namespace trainyard::sim {

struct ReplayOptions {
  // Policies to run: FGD protocol names (fgd_policies.h) or core:NAME.
  std::vector<std::string> policies;
  uint64_t seed = 42;          // of the policies' tie-breaks
  double arrival_scale = 1.0;  // arrival times are divided by it
  int samples = 10;            // allocation samples over the replay's span
};

struct ReplayPolicyResult {
  std::string name;
  int64_t placed = 0;
  int64_t never_placed = 0;     // still waiting when the last event passed
  double mean_delay_s = 0;      // over placed pods
  double p95_delay_s = 0;       // nearest rank
  double max_delay_s = 0;
  int64_t delayed = 0;          // placed pods that waited at all
  double mean_alloc_pct = 0;    // time-weighted, from first arrival to last arrival
  std::vector<double> alloc_pct;  // at ReplayReport::sample_times_s
  double seconds = 0;           // wall-clock seconds of the run
};

struct ReplayReport {
  std::string nodes_source;
  std::string trace_source;
  double arrival_scale = 1.0;
  int64_t pods = 0;
  int64_t gpu_capacity_milli = 0;
  std::vector<int64_t> sample_times_s;  // simulated seconds
  std::vector<ReplayPolicyResult> policies;
};

// Runs the replay. Errors: no policies, an unknown policy (listing the known
// ones), arrival_scale <= 0, samples < 1, a gang in the trace (a pod list
// is one task per job), a cluster without GPUs.
absl::StatusOr<ReplayReport> RunReplayProtocol(const NodeList& nodes, const Trace& trace,
                                               const ReplayOptions& options);

// The report as JSON: {"protocol": "replay", ..., "policies": {NAME: {...}}}.
nlohmann::json ReplayReportToJson(const ReplayReport& report);
// The report as a table, one column per policy.
std::string FormatReplayReport(const ReplayReport& report);

}  // namespace trainyard::sim
