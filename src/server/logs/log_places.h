// Where a job's tasks keep their logs, as the log hub needs to know it: the
// values the control state hands out for the hub (log_hub.h), kept apart so
// the control state need not know the hub.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "proto/trainyard.pb.h"

namespace trainyard::server {

// Where one task of a job is.
struct TaskLogPlace {
  std::string role;
  int index = 0;
  std::string node;        // where its current launch runs or ran; "" = not placed now
  int attempt = 0;         // its current attempt
  int launch_attempt = 0;  // the attempt its current launch started at
  bool done = false;       // in a final state
  // Every launch, oldest first: (first attempt, node). Attempt A ran on the
  // node of the last launch whose first attempt is <= A.
  std::vector<std::pair<int, std::string>> launches;

  // The node that ran (or runs) `attempt`; "" when no launch reached it.
  std::string NodeOf(int attempt) const {
    std::string node;
    for (const auto& [first, n] : launches) {
      if (first <= attempt) node = n;
    }
    if (launches.empty() && attempt >= launch_attempt) node = this->node;  // a record from before launches
    return node;
  }
  // The latest attempt that was launched (-1: none). A requeued task waits
  // at an attempt that has not run yet.
  int LatestRun() const {
    if (!node.empty()) return attempt;
    if (launches.empty()) return -1;
    return std::max(launches.back().first, attempt - 1);
  }
};

struct JobLogPlaces {
  // The job's id: agents keep logs by it, and a name can be reused after a
  // delete, so a stream reads the job it opened and no other.
  uint64_t job_id = 0;
  std::vector<TaskLogPlace> tasks;
  bool job_done = false;  // the job is in a final state
  v1::JobState job_state = v1::JOB_QUEUED;
  std::string pending_reason;
  // The state (READY, LOST, ...) of every node a launch went to.
  std::map<std::string, std::string> node_states;
};

}  // namespace trainyard::server
