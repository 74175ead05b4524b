// Per-attempt task logs under the agent's data dir, kept after the task and
// its job end: DATA/logs/job_ID/ROLE-INDEX/attempt-N.{stdout,stderr} (and, once
// rotated, attempt-N.stdout@BASE segments: log_capture.h), plus
// attempt-N.exit written when the attempt ends (so a reader, or an agent that
// restarted, knows the log is complete and how the attempt ended).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/task.h"

namespace trainyard::agent {

enum class LogStream { kStdout, kStderr };

// A piece of a log read at an offset.
struct LogChunk {
  std::string data;
  int64_t next_offset = 0;  // where the next read starts
  bool complete = false;    // the attempt ended and nothing is left after next_offset
  bool at_end = false;      // nothing is left after next_offset now
};

// One segment file of a log: bytes [base, base + size) of the whole log.
struct LogSegment {
  int64_t base = 0;
  int64_t size = 0;
  std::string path;
};

struct LogReadOptions {
  int attempt = -1;  // -1: the latest attempt
  LogStream stream = LogStream::kStdout;
  int64_t offset = 0;
  int64_t limit = 1 << 20;  // at most this many bytes
};

class TaskLogs {
 public:
  // REQUIRES: data_dir exists or can be created.
  explicit TaskLogs(std::string data_dir) : data_dir_(std::move(data_dir)) {}

  // DATA/logs/PLACE (TaskKey::Place: by the job's id).
  std::string TaskDir(const TaskKey& key) const;
  std::string Path(const TaskKey& key, int attempt, LogStream stream) const;
  // attempt-N.wait: the wait status the task's keeper records at its end.
  std::string WaitStatusPath(const TaskKey& key, int attempt) const;
  // Creates the task's log directory.
  absl::Status Prepare(const TaskKey& key) const;
  // Marks an attempt as ended, recording how.
  absl::Status MarkEnded(const TaskKey& key, int attempt, const TaskExit& exit) const;
  // True when MarkEnded was called for the attempt.
  bool Ended(const TaskKey& key, int attempt) const;

  // The attempts that have logs, ascending; NotFound naming the task when none.
  absl::StatusOr<std::vector<int>> Attempts(const TaskKey& key) const;
  // Bytes written so far to attempt `attempt`'s stdout and stderr together
  // (stamps included; rotated-away bytes counted): the end offsets of both
  // logs. 0 when there are none.
  int64_t WrittenBytes(const TaskKey& key, int attempt) const;
  // The segments of one log that are there now, oldest first.
  std::vector<LogSegment> Segments(const TaskKey& key, int attempt, LogStream stream) const;
  // Reads up to options.limit bytes from options.offset of the whole log
  // (within one segment). From an offset whose bytes were rotated away it
  // returns a stamped line saying how many were dropped, with next_offset
  // where the kept part starts. NotFound naming the task and attempt when
  // there is no such log; OutOfRange for an offset past the end.
  absl::StatusOr<LogChunk> Read(const TaskKey& key, const LogReadOptions& options) const;

  // Where to start reading a log so as to get its last `tail_lines` lines
  // (-1: all) written at or after `since_unix_nanos` (0: any time), by the
  // lines' stamps (task_logs_seek.cc). NotFound as Read.
  absl::StatusOr<int64_t> StartOffset(const TaskKey& key, int attempt, LogStream stream, int tail_lines,
                                      int64_t since_unix_nanos) const;

  // Follows a log: hands every new piece to `sink` until the attempt ends
  // and all of it was read (OK), `sink` returns false (OK) or reading fails.
  // Looks for new data every `poll`.
  absl::Status Follow(const TaskKey& key, const LogReadOptions& options,
                      const std::function<bool(const std::string&)>& sink,
                      absl::Duration poll = absl::Milliseconds(50)) const;

 private:
  absl::StatusOr<LogChunk> ReadSegments(const std::vector<LogSegment>& segments, const LogReadOptions& options) const;

  std::string data_dir_;
};

}  // namespace trainyard::agent
