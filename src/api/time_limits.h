// Jobs' time limits: `activeDeadline` as a spec and a queue config write it
// ("2h", "30m", "90s", "1h30m"), when a started job's limit runs out, and how
// describe shows the limit and the time left. One home for these rules: the
// server's control state, the REST API and the CLI call them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/service.pb.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// Parses a positive duration: a number with a unit (h, m, s, ms), or several
// ("1h30m"). Returns milliseconds. InvalidArgument, naming the text, for
// anything else (a bare number, a zero, a negative or an infinite one).
absl::StatusOr<int64_t> ParseTimeLimit(std::string_view text);

// The form a user writes back: 7200000 -> "2h", 5400000 -> "1h30m",
// 90000 -> "1m30s".
std::string TimeLimitText(int64_t ms);

// The Unix ms a job's limit runs out: its first start (start_time_ms) plus
// spec.active_deadline_ms. 0 when it has no limit or has not started. The
// clock does not stop while a started job waits in the queue again
// (preempted, its node lost): the limit is wall-clock time, as Kubernetes'
// activeDeadlineSeconds is.
int64_t DeadlineMs(const v1::JobRecord& job);

// What is left of a live job's limit at `now_ms` (0 once it has run out);
// nullopt when the job has no limit, has not started, or has ended.
std::optional<int64_t> TimeLeftMs(const v1::JobView& job, int64_t now_ms);

// The "Time limit" line of describe: "none"; "2h (counted from when the job
// starts running)"; "2h (1h12m5s left)"; "3s (exceeded)" for a job ended
// DEADLINE_EXCEEDED; "2h" for a job that ended otherwise.
std::string TimeLimitLine(const v1::JobView& job, int64_t now_ms);

}  // namespace trainyard::api
