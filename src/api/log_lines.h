// The line format of task log files, one home for its writer's and readers'
// sides. The agent's keeper stamps each line a task writes with the time it
// read it: 19 decimal digits of Unix nanoseconds and a space, then the line
// as written. The stamp orders a task's stdout and stderr lines, and selects
// them by time, without a second file; readers strip it unless asked to
// show it. A line without a stamp (a log written before stamps) is text.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace trainyard::api {

inline constexpr int kLogStampBytes = 20;

// The trailing metadata key a server puts on every Logs stream it ends
// itself: a stream that ends UNAVAILABLE without it lost its server (killed,
// paused, cut off), and a follower opens it again (log_resume.h).
inline constexpr char kLogsEndedByServerKey[] = "trainyard-logs-ended-by-server";

// The stamp of a line written at `unix_nanos`. REQUIRES: unix_nanos >= 0.
std::string LogStamp(int64_t unix_nanos);
// The time of a stamp at the start of `line`; nullopt when it has none
// (19 digits above int64's range are no stamp).
std::optional<int64_t> ParseLogStamp(absl::string_view line);
// RFC 3339 with nanoseconds, UTC ("2026-12-01T10:00:51.123456789Z"), as
// `trainyard logs --timestamps` prints it.
std::string FormatLogTime(int64_t unix_nanos);

// `trainyard logs --since`: a duration back from `now` ("10m", "1h30m",
// "90s") or an RFC 3339 time ("2026-12-01T10:00:00Z"), as Unix nanoseconds
// (clamped to the int64 range); nullopt when it is neither.
std::optional<int64_t> ParseLogSince(absl::string_view text, absl::Time now);

// A piece of a log's text with its stamp taken off.
struct LogPiece {
  int64_t unix_nanos = 0;   // of the line the piece belongs to (0: unstamped)
  absl::string_view text;   // valid during the callback
  bool line_start = false;  // the piece begins a line
  bool line_end = false;    // it ends with '\n'
};

// Splits one log (stdout or stderr of one attempt) into pieces as its bytes
// arrive in arbitrary chunks; a stamp cut by a chunk's end waits for the
// next. Pieces never span lines.
class LogSplitter {
 public:
  using Emit = std::function<void(const LogPiece&)>;
  void Add(absl::string_view data, const Emit& emit);
  // The log ended: what waits (a cut-off stamp) is text.
  void Finish(const Emit& emit);

 private:
  bool at_line_start_ = true;
  int64_t nanos_ = 0;
  std::string held_;  // the start of a line that may be a stamp
};

}  // namespace trainyard::api
