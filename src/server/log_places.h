// Where a job's tasks keep their logs, as the log hub needs to know it: the
// values the control state hands out for the hub (log_hub.h), kept apart so
// the control state need not know the hub.
#pragma once

#include <string>
#include <vector>

namespace trainyard::server {

// Where one task of a job is.
struct TaskLogPlace {
  std::string role;
  int index = 0;
  std::string node;        // where its current launch runs or ran; "" = never placed
  int attempt = 0;         // its current attempt
  int launch_attempt = 0;  // the attempt its current launch started at
  bool done = false;       // in a final state
};

struct JobLogPlaces {
  std::vector<TaskLogPlace> tasks;
  bool job_done = false;  // the job is in a final state
};

}  // namespace trainyard::server
