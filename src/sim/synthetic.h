// The synthetic workload of `trainyard sim --synthetic-nodes ...`: a
// cluster of identical nodes and a stream of identical jobs (gangs of
// tasks) all submitted at time 0 that never end, so the scheduler fills the
// cluster; used for capacity planning and to measure placements per second.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "sim/trace.h"

namespace trainyard::sim {

struct SyntheticOptions {
  int64_t nodes = 10000;
  int gpus_per_node = 8;
  int64_t tasks = 100000;
  int gang = 1;           // tasks per job
  int gpus_per_task = 1;
  // Per node; tasks take a share in proportion to their GPUs (a task of
  // one GPU takes 1/gpus_per_node of each), so GPUs run out first.
  int64_t cpu_milli_per_node = 128000;
  int64_t memory_mib_per_node = 1048576;
};

// OK when the options make sense; the error names the option (as its
// command-line flag) and the limit, e.g. "--gpus-per-task 16 is above
// --gpus-per-node 8".
absl::Status ValidateSynthetic(const SyntheticOptions& options);

// Nodes "syn-node-00000", ... with the default topology for their GPU count.
// REQUIRES: ValidateSynthetic(options).ok().
NodeList SyntheticNodes(const SyntheticOptions& options);

// ceil(tasks / gang) jobs "syn-job-0", ...; the last holds the remainder.
// REQUIRES: ValidateSynthetic(options).ok().
Trace SyntheticTrace(const SyntheticOptions& options);

}  // namespace trainyard::sim
