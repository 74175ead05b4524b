// `trainyard sim --protocol fgd`: the experiment of the FGD paper's artifact
// (Alibaba openb traces), several placement policies side by side on the
// same workloads. Per seed: the trace's tasks sorted by name and shuffled
// with the seed; tasks drawn at random from the trace appended until the
// GPU demand reaches `inflate` x the cluster's GPU capacity (or tasks
// removed at random while it is above); then the tasks arrive one by one and
// stay (no departures); a task that does not fit when it arrives fails for
// good. Measured at the points where the arrived GPU demand reaches 100 %
// and `inflate` x 100 % of capacity: the GPU share allocated (% of the
// cluster's GPU capacity, in thousandths of a GPU), whole GPUs left unused,
// the cluster's expected fragmentation, and tasks failed by shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/trace.h"

namespace trainyard::sim {

struct FgdOptions {
  std::vector<uint64_t> seeds = {42};
  double inflate = 1.3;  // the workload's GPU demand / cluster GPU capacity
  // Policies to run (see FgdPolicyNames()); empty = all of them.
  std::vector<std::string> policies;
};

// What one policy reached at one arrival point, averaged over the seeds.
struct FgdPoint {
  double gpu_alloc_pct = 0;       // GPU share allocated / GPU capacity
  double unallocated_gpus = 0;    // GPUs with nothing allocated
  double fragmentation_pct = 0;   // expected fragmentation / GPU capacity
  double failed_tasks = 0;
};

struct FgdPolicyResult {
  std::string name;
  // Keyed by arrived demand in % of capacity: "100" and e.g. "130".
  std::map<std::string, FgdPoint> at_arrived;
  // Tasks that failed over the whole run, averaged over the seeds, by shape:
  // "cpu-only", "share" (< 1 GPU), "1-gpu", "2-gpu", ... and
  // "model-constrained" (any shape that names GPU models).
  std::map<std::string, double> failed_by_shape;
  double seconds_per_seed = 0;  // wall-clock seconds of one seed's run
};

struct FgdReport {
  std::string nodes_source;
  std::string trace_source;
  std::vector<uint64_t> seeds;
  double inflate = 0;
  int64_t gpu_capacity_milli = 0;
  int64_t tasks_per_seed = 0;  // after inflation (mean)
  std::vector<FgdPolicyResult> policies;
};

// The policies run by default, in report order: "first-fit", "best-fit",
// "random", "fgd", "trainyard" (the server's placement, core:fragmentation;
// fgd_policies.h and fgd_core_policy.h say what each does).
const std::vector<std::string>& FgdPolicyNames();

// Parses "42-51" or "1,5,9" (or a mix). Errors name the bad part.
absl::StatusOr<std::vector<uint64_t>> ParseSeedList(const std::string& text);

// Runs the protocol. Errors: an unknown policy name (listing the known
// ones), inflate <= 0, no seeds, a cluster without GPUs, a trace without
// GPU demand, a task asking a model no node has is fine (it fails).
absl::StatusOr<FgdReport> RunFgdProtocol(const NodeList& nodes, const Trace& trace,
                                         const FgdOptions& options);

// The report as JSON: {"protocol": "fgd", ..., "policies": {NAME:
// {"gpu_alloc_pct_at_arrived": {"100": X, "130": Y}, ...}}}.
nlohmann::json FgdReportToJson(const FgdReport& report);
// The report as a table, one column per policy.
std::string FormatFgdReport(const FgdReport& report);

}  // namespace trainyard::sim
