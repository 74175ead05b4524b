// LogPusher: the agent's side of log subscriptions. The server asks for one
// attempt's stdout or stderr from an offset; the pusher sends what is there
// in pieces of bounded size and, when following, what the task writes next
// until the attempt has ended and all of it was sent, or the server cancels.
//
// New output is noticed through inotify on the task's log directory (the
// task appends to its log files itself, so the agent has no write of its own
// to hook), so nothing polls while tasks are quiet. Only where inotify is not
// available (no instance, no watch left) does it look at the unwatched logs
// once per `fallback_poll`, all of them in one pass.
//
// Pacing: a subscription has at most window_bytes sent beyond the offset the
// server last acknowledged. Catching up on a large log then never floods the
// agent's one stream, which heartbeats and statuses share, and what the
// server's reader has not taken yet stays in the file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/task_logs.h"

namespace trainyard::agent {

struct LogSubscription {
  uint64_t id = 0;
  TaskKey key;
  int attempt = -1;  // -1: the latest attempt that has a log now
  LogStream stream = LogStream::kStdout;
  int64_t offset = 0;
  int64_t chunk_bytes = 64 << 10;    // the most one piece carries
  int64_t window_bytes = 256 << 10;  // the most sent and not acknowledged
  bool follow = false;  // false: what is there now, then done (eof)
  // Instead of `offset`: start at the last tail_lines lines (-1: any) written
  // since since_unix_nanos (0: any time). Pieces tell where they start.
  int tail_lines = -1;
  int64_t since_unix_nanos = 0;
  bool seek() const { return tail_lines >= 0 || since_unix_nanos > 0; }
  uint64_t tag = 0;     // handed back with each piece (the server session)
};

// One piece of a subscription's log, or its end.
struct LogPiece {
  uint64_t id = 0;
  uint64_t tag = 0;
  int attempt = 0;
  int64_t offset = 0;  // where data starts in the log
  int64_t next_offset = 0;  // where the next piece starts (after dropped bytes too)
  std::string data;
  bool eof = false;       // nothing after it now
  bool finished = false;  // the attempt has ended and this is its last piece
  std::string error;      // the subscription is over: why
};

struct LogPusherOptions {
  size_t max_subscriptions = 1024;
  int64_t max_chunk_bytes = 1 << 20;
  absl::Duration fallback_poll = absl::Seconds(1);
};

class LogPusher {
 public:
  // Called on the pusher's thread, one piece at a time. False: the piece
  // could not be sent; the subscription is dropped.
  using Sink = std::function<bool(const LogPiece&)>;

  // Starts the pusher's thread. REQUIRES: logs outlives the pusher.
  LogPusher(const TaskLogs* logs, LogPusherOptions options, Sink sink);
  ~LogPusher();

  // Adds a subscription (replacing one with the same id). Errors:
  // ResourceExhausted naming the limit when max_subscriptions are open;
  // InvalidArgument for a bad task key or size; NotFound when attempt is -1
  // and the task has no log yet.
  absl::Status Subscribe(LogSubscription sub);
  // The server has taken subscription `id` up to `offset`.
  void Ack(uint64_t id, int64_t offset);
  void Cancel(uint64_t id);
  // Drops every subscription (the server's stream they belong to ended).
  void CancelAll();
  size_t subscriptions() const;

 private:
  struct Sub {
    LogSubscription spec;
    int64_t sent = 0;   // the next piece starts here
    int64_t acked = 0;  // the server has taken up to here
    std::string dir;    // watched directory ("" = not watched)
    uint64_t generation = 0;  // tells a subscription from one that replaced it
    bool placed = false;      // its start is known (a seek has been resolved)
    // False from a seek's placing until its first piece went: that piece
    // goes at once, empty if need be, so the server learns where the agent
    // started (and never asks it to seek again, later, past lines written
    // in between).
    bool start_told = true;
  };
  struct Watch {
    int wd = -1;
    std::set<uint64_t> subs;
  };

  void Run();
  void Wake();
  // Reads inotify events and marks the subscriptions of the directories
  // they name as due.
  void DrainEvents();
  // Sends subscription `id` what it may send now.
  void Pump(uint64_t id);
  // One piece read from the log, and whether it ends the subscription.
  // Nullopt: nothing to send yet.
  std::optional<std::pair<LogPiece, bool>> ReadPiece(const Sub& sub, int64_t want) const;
  // Resolves a seek (tail or since) to its start offset; false while the
  // attempt has no log yet (or the subscription went away).
  bool Place(uint64_t id, Sub& sub);
  void WatchLocked(uint64_t id, Sub& sub) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TaskLogs* const logs_;
  const LogPusherOptions options_;
  const Sink sink_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1;

  mutable absl::Mutex mu_;
  std::map<uint64_t, Sub> subs_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> due_ ABSL_GUARDED_BY(mu_);        // to pump on the next pass
  std::set<uint64_t> unwatched_ ABSL_GUARDED_BY(mu_);  // following without inotify
  std::map<std::string, Watch> watches_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> dir_of_ ABSL_GUARDED_BY(mu_);  // wd -> directory
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace trainyard::agent
