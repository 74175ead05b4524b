// The checks of a submission that need nothing of the control state: the
// server's defaults for what a spec leaves out, the bounds of what one job
// may cost (api::SpecBounds), validation against the allocation limits and
// the queue. They read only the config and the queue tree, which never
// change while the server runs, so JobManager runs them on the submitter's
// thread without its lock: a large spec's checks hold up no other caller.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scheduler/scheduler.h"
#include "proto/trainyard.pb.h"
#include "server/config.h"

namespace trainyard::server {

// A spec that passed CheckSubmission, defaults filled in.
struct CheckedSpec {
  v1::JobSpec spec;
  // "; server defaults for what the spec leaves out: ..." for the job's
  // first event; "" when the spec asked for everything.
  std::string defaulted;
};

// Fills in user, queue (config.default_queue, else "default"), cpu and
// memory defaults, the queue's defaultTime as a missing activeDeadline, and
// the ports frameworks need; then checks the bounds first (a spec over them
// is answered with those alone, before any work that grows with it), then
// validation, the queue and its maxTime, answered with `parse_problems` in
// one InvalidArgument, one "field: problem" per line. Linear in the spec's
// size.
absl::StatusOr<CheckedSpec> CheckSubmission(v1::JobSpec spec, std::vector<std::string> parse_problems,
                                            const ServerConfig& config, const core::QueueConfig& queues);

}  // namespace trainyard::server
