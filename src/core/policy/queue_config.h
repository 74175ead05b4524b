// Queue configuration as values: a tree of queues with capacity and
// max-capacity percentages (Capacity policy), weights and min-shares (Fair
// policy), and per-user limits. src/core never reads files: the YAML loader
// lives in src/api/queue_config_yaml.h and hands a QueuesConfig here for
// validation.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/resources/resource.h"

namespace trainyard::core {

struct QueueConfig {
  std::string name;  // unique in the whole tree; leaves are what jobs name
  // Capacity policy: share of the parent's capacity guaranteed to this
  // queue, and the most it may borrow up to (both in percent of parent).
  double capacity_percent = 0;
  double max_capacity_percent = 100;
  // A single user may hold at most this percent of the queue's maximum
  // capacity (Capacity) or of its fair share (Fair). 100 = no limit.
  double user_limit_percent = 100;
  // Fair policy: weight of the queue among its siblings (> 0) and the
  // resources it is owed before any weighted sharing.
  double weight = 1;
  Resource min_share;
  std::vector<QueueConfig> children;
  // Time limits of its jobs (activeDeadline), as a Slurm partition's MaxTime
  // and DefaultTime: the longest a job may ask, and what a job that asks
  // none gets. Zero = none. A child that sets neither has its parent's (the
  // YAML loader fills them in).
  absl::Duration max_time = absl::ZeroDuration();
  absl::Duration default_time = absl::ZeroDuration();
};

struct QueuesConfig {
  QueueConfig root{.name = "root", .capacity_percent = 100};
  // A queue under its share (Capacity: guaranteed capacity; Fair: fair
  // share or min-share) for longer than this may take resources back by
  // preempting queues above theirs. Zero disables reclaim.
  absl::Duration reclaim_timeout = absl::Minutes(5);
};

// OK when the tree is usable: names non-empty and unique, percentages in
// [0, 100], max_capacity >= capacity, children's capacities summing to at
// most 100, weights > 0, min-shares non-negative, time limits non-negative
// with a default no longer than the maximum. The error names the queue
// path and field, e.g. "queue root.research: max_capacity_percent 30 is
// below capacity_percent 40".
absl::Status ValidateQueues(const QueuesConfig& config);

// A one-leaf config: root with a single leaf "default" at 100%.
QueuesConfig DefaultQueues();

}  // namespace trainyard::core
