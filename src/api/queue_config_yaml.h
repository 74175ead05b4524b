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
//       aclSubmitJobs: [alice, bob]   # who may submit here ("*": everyone)
//       aclAdministerJobs: [carol]    # who may kill, delete, read logs of its jobs
//       aclProduction: [alice]        # who may submit priority production here
//       maxTime: 24h                  # the longest activeDeadline a job here may ask
//       defaultTime: 2h               # the activeDeadline of a job that asks none
//
// Keys are camelCase, as in job specs (docs/queues.md). The snake_case keys
// of earlier files (max_capacity, user_limit, min_share: {memory_mb,
// vcores}, reclaim_timeout) are still read.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/policy/queue_config.h"

namespace trainyard::api {

// Who may use a queue (docs/queues.md, "Access"): user names, "*" for
// everyone. A queue that does not set a list has its parent's; the root's
// are: everyone submits, nobody but cluster admins administers or submits
// production work. Cluster admins may always do all three.
struct QueueAcl {
  std::vector<std::string> submit_jobs = {"*"};
  std::vector<std::string> administer_jobs;
  std::vector<std::string> production;
};

// The ACL of every queue of the tree by name, with the parents' lists filled
// in; the ACL of the implicit queue "default" when there is no queue file.
using QueueAcls = std::map<std::string, QueueAcl>;

struct QueueConfigFile {
  std::string policy;         // "" when the file does not say
  std::string default_queue;  // "" when the file does not say
  core::QueuesConfig queues;
  QueueAcls acls;
};

// True when `acl_list` (one of QueueAcl's lists) names `user` or "*".
bool AclAllows(const std::vector<std::string>& acl_list, const std::string& user);

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
