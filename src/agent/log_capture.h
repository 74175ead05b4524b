// What a task's keeper does with the task's output: it reads the task's
// stdout and stderr pipes and appends each to its log, every line stamped
// with the time it was read (api/log_lines.h), and keeps each log under its
// cap by rotation: the log is a series of segment files, attempt-N.stdout
// (the first, from offset 0) and attempt-N.stdout@BASE (one that starts at
// offset BASE of the whole log); when the newest passes a segment's size at
// a line start a new one begins, and the oldest are removed so that what is
// kept stays within the cap. Offsets in the whole log never change, so a
// reader that follows goes on into the next segment; one that was behind
// learns that bytes were dropped (TaskLogs::Read).
//
// Runs in the keeper, a child forked from the threaded agent: only
// async-signal-safe calls, no allocation.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace trainyard::agent {

// The segment size for a log capped at `max_bytes` (0: no cap, no rotation).
int64_t LogSegmentBytes(int64_t max_bytes);

class LogCapture {
 public:
  static constexpr int kMaxSegments = 16;

  // Opens (creates) the first segment `name` in `dir_fd`. False when it
  // cannot. REQUIRES: name shorter than 200 bytes; dir_fd outlives this.
  bool Open(int dir_fd, const char* name, int64_t max_bytes);
  // Appends what the task wrote, read at `unix_nanos`.
  void Write(const char* data, size_t n, int64_t unix_nanos);
  void Close();

 private:
  void Put(const char* data, size_t n);
  void Flush();
  void Rotate();
  // Writes the name of the segment that starts at `base` into name_buf_.
  const char* SegmentName(int64_t base);

  int dir_fd_ = -1;
  int fd_ = -1;
  char name_[200] = {};
  char name_buf_[240] = {};
  int64_t max_bytes_ = 0;
  int64_t segment_bytes_ = 0;
  int64_t bases_[kMaxSegments] = {};  // kept segments, oldest first; the last is open
  int segments_ = 0;
  int64_t size_ = 0;  // bytes in the open segment
  bool at_line_start_ = true;
  char buf_[64 << 10];
  size_t buffered_ = 0;
};

// The keeper's loop: reads `out_fd` and `err_fd` (the task's pipes) into
// the captures until both end, or until `task` has exited and what its
// pipes held is read (a child it left may keep them open). Returns the
// task's wait status. REQUIRES: SIGCHLD blocked and handled (not ignored).
int CaptureUntilExit(pid_t task, int out_fd, int err_fd, LogCapture& out, LogCapture& err);

}  // namespace trainyard::agent
