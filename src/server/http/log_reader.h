// LogReader: one stream of a task's log as the REST API reads it — the
// server's log hub behind it (server/logs/hub_log_reader.h), the same streams
// `trainyard logs` gets over gRPC. A reader holds one of the hub's
// followers until it is destroyed.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::server::http {

struct LogRead {
  enum class Kind {
    kChunk,    // `chunk` is the stream's next piece
    kEnd,      // the stream has ended with `end`
    kWaiting,  // nothing came before the deadline; ask again
  };
  Kind kind = Kind::kWaiting;
  v1::LogChunk chunk;
  absl::Status end;
};

class LogReader {
 public:
  virtual ~LogReader() = default;
  // The next chunk, the end, or kWaiting at `deadline`. Asking again tells
  // the hub the last chunk was taken (so it sends more: what a reader has
  // not taken is bounded).
  virtual LogRead Next(absl::Time deadline) = 0;
};
using LogReaderPtr = std::unique_ptr<LogReader>;

}  // namespace trainyard::server::http
