// LogResume: `trainyard logs -f` goes on through a server's failover. When
// the stream ends with the server gone (the leader killed, paused or cut
// off, and a standby took over), the CLI opens it again at the next server
// from a time early enough for every line not shown yet
// (LogsRequest.since_unix_nanos): for each output already seen, the last
// line begun (or, for one quiet longer, kDeliveryLag before the cut); for
// outputs not seen yet, when the first stream opened (less kClockSkew), or
// kDeliveryLag before the cut if later. The new stream brings again what
// was shown after that time, and LogResume takes it out: a line whose stamp
// is before the last one shown of its task's output, a line shown whole
// before, and the part of a line shown before the cut. What passes on is
// what the printer (log_printer.h) has not shown yet, with whole stamps
// only (a stamp cut by a chunk's end is held back here), so no line is lost
// or shown twice. Lines are matched by their stamps (the agents' clocks, in
// nanoseconds) and, among lines with the same stamp, by their order.
//
// What it assumes: a line reaches the client within kDeliveryLag of its
// stamp, and the agents' clocks are within kClockSkew of the client's
// (else a line of an output not seen yet may be lost, or one written just
// before the stream opened shown). Not covered: the rest of an attempt
// that ended in the gap while a later one started (the new stream goes on
// at the task's latest attempt).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "api/log_lines.h"
#include "proto/service.pb.h"

namespace trainyard::api {

inline constexpr int64_t kDeliveryLagNanos = 60'000'000'000;
inline constexpr int64_t kClockSkewNanos = 10'000'000'000;

class LogResume {
 public:
  // The first stream opens now (the client's clock, Unix ns).
  explicit LogResume(int64_t opened_unix_nanos) : opened_(opened_unix_nanos) {}

  // A chunk of a followed stream; false: drop it. `chunk`'s data may be
  // rewritten (what was shown taken out, a held-back stamp put in front).
  bool Take(v1::LogChunk& chunk);
  // The stream ended at `now` and is opened again: `req` (the first
  // stream's) is made to start early enough (above); what comes again is
  // taken out.
  void Resume(v1::LogsRequest& req, int64_t now_unix_nanos);

 private:
  struct Output {
    int attempt = -1;
    LogSplitter splitter;   // held-back stamp bytes live here
    int64_t stamp = -1;     // the last line begun (-1: none yet)
    int64_t same = 0;       // lines begun with that stamp, that one included
    int64_t into_line = 0;  // bytes of that line passed on
    // Replaying after Resume: what came again is taken out until past the
    // last line begun.
    bool replaying = false;
    int64_t seen_same = 0;   // lines with `stamp` seen again
    int64_t skip_bytes = 0;  // of the line being replayed, still to take out
    bool skip_line = false;  // the line being replayed was printed whole
  };

  // Appends to `out` what of `piece` passes.
  void Pass(Output& o, const LogPiece& piece, std::string* out);

  std::map<std::pair<std::string, bool>, Output> outputs_;  // (task, stderr)
  std::map<std::string, int> attempts_;                      // attempt_start passed on, per task
  const int64_t opened_;
};

}  // namespace trainyard::api
