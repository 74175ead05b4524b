// Queue configuration from YAML: the file format the server and `trainyard
// sim` read, turned into core::QueuesConfig and validated. Lives outside
// src/core because the core never reads files.
//
//   policy: capacity            # optional: fifo | capacity | fair
//   reclaim_timeout: 5m         # optional, default 5m; 0 disables reclaim
//   queues:
//     - name: research
//       capacity: 40            # percent of the parent (Capacity policy)
//       max_capacity: 60        # percent of the parent, default 100
//       user_limit: 50          # percent of the queue's max capacity, default 100
//       weight: 2               # Fair policy, default 1
//       min_share: {memory_mb: 0, vcores: 8, gpus: 16}   # Fair policy
//       queues: [...]           # child queues, same keys
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/policy/queue_config.h"

namespace trainyard::api {

struct QueueConfigFile {
  std::string policy;  // "" when the file does not say
  core::QueuesConfig queues;
};

// Parses YAML text. Errors name `source`, the line, the queue path and the
// key, e.g. "queues.yaml:4: queue research: max_capacity: expected a
// number, got \"lots\"", or relay core::ValidateQueues's error.
absl::StatusOr<QueueConfigFile> ParseQueueConfigYaml(std::string_view text,
                                                     std::string_view source = "queues");

// Reads and parses the file at `path`.
absl::StatusOr<QueueConfigFile> LoadQueueConfigFile(const std::string& path);

}  // namespace trainyard::api
