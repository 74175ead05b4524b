// Settings of one job master, with the documented defaults (docs/jobmaster.md)
// and validation that names the offending field.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "jobmaster/frame.h"

namespace trainyard::jobmaster {

struct JobMasterConfig {
  std::string job_name = "job";
  // Number of workers of the job; ids are 0..num_workers-1.
  int num_workers = 1;
  // Address to listen on and port (0 = any free port).
  std::string bind_address = "0.0.0.0";
  int port = 0;
  // Workers ping every ping_interval; a worker silent for
  // ping_interval * ping_misses is marked ERROR ("no ping for ...").
  absl::Duration ping_interval = absl::Seconds(1);
  int ping_misses = 5;
  // Default wait of a RESPONSE_AFTER_ALL_JOINED list request (the seed's
  // worker.to.job.master.response.wait.duration).
  absl::Duration response_wait = absl::Milliseconds(10000);
  // Default timeout of a barrier when the request names none.
  absl::Duration barrier_timeout = absl::Seconds(600);
  // Restarts a worker may use; a worker in ERROR with this many restarts
  // behind it ends the job FAILED.
  int max_restarts = 0;
  // Largest request frame accepted; bigger ones close the connection.
  uint32_t max_request_bytes = kDefaultMaxRequestBytes;
  // How often the loop checks pings and timeouts; 0 = derived from the
  // ping interval (a quarter of it, between 1 ms and 100 ms).
  absl::Duration tick = absl::ZeroDuration();
};

// Returns an error naming the first field out of range.
absl::Status ValidateConfig(const JobMasterConfig& config);

// The tick the loop uses for `config`.
absl::Duration EffectiveTick(const JobMasterConfig& config);

}  // namespace trainyard::jobmaster
