// Queue configuration from YAML: the file format the server and `trainyard
// sim` read, turned into core::QueuesConfig and validated. Lives outside
// src/core because the core never reads files.
//
//   policy: capacity            # optional: fifo | capacity | fair
//   reclaimTimeout: 5m          # optional, default 5m; 0 disables reclaim
//   defaultQueue: research      # optional: the queue of jobs that name none
//   queues:
//     - name: research
//       capacity: 40            # percent of the parent (Capacity policy)
//       maxCapacity: 60         # percent of the parent, default 100
//       userLimit: 50           # percent of the queue's max capacity, default 100
//       weight: 2               # Fair policy, default 1
//       minShare: {memory: 0, cpu: 8, gpus: 16}   # Fair policy; memory in MB
//       queues: [...]           # child queues, same keys
//
// Keys are camelCase, as in job specs (docs/queues.md). The snake_case keys
// of earlier files (max_capacity, user_limit, min_share: {memory_mb,
// vcores}, reclaim_timeout) are still read.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/policy/queue_config.h"

namespace trainyard::api {

struct QueueConfigFile {
  std::string policy;         // "" when the file does not say
  std::string default_queue;  // "" when the file does not say
  core::QueuesConfig queues;
};

// Parses YAML text. Errors name `source`, the line, the queue path and the
// key, e.g. "queues.yaml:4: queue research: max_capacity: expected a
// number, got \"lots\"", or relay core::ValidateQueues's error.
absl::StatusOr<QueueConfigFile> ParseQueueConfigYaml(std::string_view text,
                                                     std::string_view source = "queues");

// True when `name` is a leaf of the tree (what a job may name).
bool IsLeafQueue(const core::QueuesConfig& queues, const std::string& name);

// Reads and parses the file at `path`.
absl::StatusOr<QueueConfigFile> LoadQueueConfigFile(const std::string& path);

}  // namespace trainyard::api
