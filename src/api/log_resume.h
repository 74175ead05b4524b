// LogResume: `trainyard logs -f` goes on through a server's failover. When
// the stream ends with the server gone (the leader killed, paused or cut
// off, and a standby took over), the CLI opens it again at the next server
// from the time of the earliest line it last printed of any task
// (LogsRequest.since_unix_nanos); the new stream brings again what was
// printed after that time, and LogResume takes it out: a line whose stamp
// is before the last one printed of its task's output, a line printed whole
// before, and the part of a line printed before the cut. What passes on is
// what the printer (log_printer.h) has not shown yet, with whole stamps
// only (a stamp cut by a chunk's end is held back here), so no line is lost
// or printed twice. Lines are matched by their stamps (the agent's clock,
// in nanoseconds) and, among lines with the same stamp, by their order.
//
// Not covered: an attempt that began and ended in the gap while a later
// one runs (the new stream starts at the task's latest attempt).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "api/log_lines.h"
#include "proto/service.pb.h"

namespace trainyard::api {

class LogResume {
 public:
  // A chunk of the stream; false: drop it. `chunk`'s data may be rewritten
  // (what was printed taken out, a held-back stamp put in front).
  bool Take(v1::LogChunk& chunk);
  // The stream ended and is opened again: `req` (the first stream's) is
  // made to start at the earliest line last printed; what comes again is
  // taken out.
  void Resume(v1::LogsRequest& req);

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
  bool resumed_ = false;
};

}  // namespace trainyard::api
