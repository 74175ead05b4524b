// What `trainyard sim` does, apart from parsing its command line: load the
// node list and trace (or generate the synthetic ones), run one simulation
// per (queue policy, placement) combination so strategies are compared on
// the same input, and return the reports. The verb in src/cli only parses
// flags and prints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/synthetic.h"

namespace trainyard::sim {

struct SimCommandOptions {
  std::string nodes_path;  // node list CSV (file mode)
  std::string trace_path;  // task trace CSV (file mode)
  std::optional<SyntheticOptions> synthetic;  // set: synthetic mode
  // Comma-separated names; one run per combination, queue policy major.
  // "" = the queues file's `policy`, else fifo.
  std::string queue_policies;
  std::string placements = "topology";
  // A queue tree in YAML (api/queue_config_yaml.h); "" = one equal leaf
  // per queue the trace names.
  std::string queues_path;
  // Everything else a run takes; queue_policy and placement are set per run.
  SimOptions base;
};

// Splits "fifo, fair" into {"fifo", "fair"}. Errors: an empty list or name,
// a name given twice; `flag` names the option in the message.
absl::StatusOr<std::vector<std::string>> SplitPolicyList(const std::string& list,
                                                         const std::string& flag);

// Runs every combination. Errors (before any run starts): neither or both
// of file and synthetic mode, unreadable or bad input files (file, line
// and field), a bad queues file, unknown policy names (listing the known
// ones). Jobs naming a queue the queues file lacks are reported
// unschedulable with the scheduler's reason.
absl::StatusOr<std::vector<SimReport>> RunSimCommand(const SimCommandOptions& options);

}  // namespace trainyard::sim
