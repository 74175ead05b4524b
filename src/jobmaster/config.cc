// Validation of JobMasterConfig.
#include "jobmaster/config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace trainyard::jobmaster {

namespace {
// Largest job a master serves: ids must fit comfortably in one process.
constexpr int kMaxWorkers = 1'000'000;
}  // namespace

absl::Status ValidateConfig(const JobMasterConfig& c) {
  if (c.job_name.empty()) return absl::InvalidArgumentError("job name is empty (--job)");
  if (c.num_workers < 1 || c.num_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "workers = %d is out of range: a job has 1..%d workers (--workers)", c.num_workers,
        kMaxWorkers));
  }
  if (c.port < 0 || c.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("port = %d is out of range 0..65535 (--port)", c.port));
  }
  if (c.ping_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ping interval must be positive (--ping-interval-ms)");
  }
  if (c.ping_misses < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ping misses = %d must be at least 1 (--ping-misses)", c.ping_misses));
  }
  if (c.response_wait <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("response wait must be positive (--response-wait-ms)");
  }
  if (c.barrier_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("barrier timeout must be positive (--barrier-timeout-ms)");
  }
  if (c.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max restarts = %d must not be negative (--max-restarts)", c.max_restarts));
  }
  if (c.max_request_bytes < 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max request bytes = %u is too small (at least 64)", c.max_request_bytes));
  }
  if (c.max_buffered_input_bytes < c.max_request_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max buffered input bytes = %u is below max request bytes = %u: one frame must fit",
        c.max_buffered_input_bytes, c.max_request_bytes));
  }
  if (c.max_queued_output_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max queued output bytes = %u is too small (at least 1024)", c.max_queued_output_bytes));
  }
  for (auto [d, name] : {std::pair{c.partial_frame_timeout, "partial frame timeout"},
                         std::pair{c.register_timeout, "register timeout"},
                         std::pair{c.idle_timeout, "idle timeout"}}) {
    if (d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s must be positive", name));
    }
  }
  if (c.passed_barriers < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "passed barriers = %d must not be negative", c.passed_barriers));
  }
  return absl::OkStatus();
}

absl::Duration EffectiveTick(const JobMasterConfig& c) {
  if (c.tick > absl::ZeroDuration()) return c.tick;
  return std::clamp(c.ping_interval / 4, absl::Milliseconds(1), absl::Milliseconds(100));
}

}  // namespace trainyard::jobmaster
