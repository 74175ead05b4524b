// Settings of one job master, with the documented defaults (docs/jobmaster.md)
// and validation that names the offending field.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "jobmaster/frame.h"

namespace trainyard::jobmaster {

// A partial frame up to this size is always kept, whatever the total cap:
// workers' requests are far smaller, so a flood of big partial frames cannot
// crowd real workers out.
inline constexpr size_t kSmallPartialFrameBytes = 4096;

struct JobMasterConfig {
  std::string job_name = "job";
  // The job's secret (TRAINYARD_JOB_SECRET): STARTING and ATTACH without it
  // are refused. Empty: no check (a master run by hand or in the client).
  std::string job_secret;
  // The master's own job token (TRAINYARD_JOB_TOKEN): the key of the
  // server's orders pushed to the master's port (ServerOrder.mac). Empty:
  // such orders are refused, and orders come only in the answers to the
  // master's reports.
  std::string order_key;
  // How long after an order the master waits for a worker to say it
  // checkpoints (a shell task says so by polling) before it reports that
  // none does: an order pushed the moment a job starts must not find its
  // workers before their first poll.
  absl::Duration checkpoint_declare_window = absl::Seconds(1);
  // Number of workers of the job; ids are 0..num_workers-1.
  int num_workers = 1;
  // Address to listen on (an IPv4 address or a host name that resolves to
  // one; the server passes the node's address) and port (0 = any free port).
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
  // Largest request frame accepted; bigger ones close the connection. Also
  // the most one connection's partial frame can hold.
  uint32_t max_request_bytes = kDefaultMaxRequestBytes;
  // Bytes of partial frames the master holds over all its connections. A
  // connection whose partial frame would take the total past it is closed,
  // unless that frame is small (kSmallPartialFrameBytes), as workers' are.
  size_t max_buffered_input_bytes = 16u << 20;
  // Answers queued for one connection that it has not read yet. A peer that
  // lets more pile up is closed (one answer of any size is always queued).
  size_t max_queued_output_bytes = 8u << 20;
  // A frame begun and not completed within this closes its connection.
  absl::Duration partial_frame_timeout = absl::Seconds(10);
  // A connection that has not registered (STARTING or ATTACH) within this
  // is closed.
  absl::Duration register_timeout = absl::Seconds(10);
  // A connection silent this long that waits for nothing (no barrier, no
  // all-joined list) is closed; the worker library reconnects by itself.
  absl::Duration idle_timeout = absl::Minutes(10);
  // Barriers the job has passed before this master started (a restarted
  // master that kept its count).
  int64_t passed_barriers = 0;
  // File where the master records the barriers passed (barrier_record.h),
  // for the master that restarts after it; empty: none.
  std::string barrier_record;
  // True for a master that restarted without knowing how many barriers the
  // job passed: it believes the generation its workers present, until its
  // first barrier completes. Otherwise a generation above the barriers the
  // job passed is refused.
  bool learn_barriers = false;
  // Where the membership version (the worker table's) starts. The server
  // starts it at its start time in microseconds, so a restarted master never
  // repeats a version an earlier one gave out (a worker's cached table would
  // pass for current); 0 for a state driven by hand.
  int64_t first_membership_version = 0;
  // How often the loop checks pings and timeouts; 0 = derived from the
  // ping interval (a quarter of it, between 1 ms and 100 ms).
  absl::Duration tick = absl::ZeroDuration();
};

// Returns an error naming the first field out of range.
absl::Status ValidateConfig(const JobMasterConfig& config);

// The tick the loop uses for `config`.
absl::Duration EffectiveTick(const JobMasterConfig& config);

}  // namespace trainyard::jobmaster
