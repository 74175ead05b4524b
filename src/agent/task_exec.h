// TaskExec: commands run inside running tasks (`trainyard exec`). The
// server relays a client's stream: an order opens a session, which starts
// the command as the task's attempt runs (ExecTarget: its account, cgroups,
// working dir and environment) in a session and process group of its own,
// with pipes or a pseudo-terminal for its stdin, stdout and stderr.
//
// One thread waits in poll() on every session's descriptors, its process
// (a pidfd) and an eventfd the callers ring; it hands output to the sink in
// order, one piece at a time and never under the lock. Pacing: at most
// window_bytes of a session's output are sent beyond what the server has
// acknowledged (the rest waits in the pipe, and the command blocks on a
// full pipe as on a slow terminal); input is written as the command takes
// it and its progress told back, so the server holds back the client's.
//
// A session ends when its command has exited and the output it left is
// sent, with the exit code or signal (what it left in the background stays
// in the task, its output no longer read). It ends early, its process group
// killed, when the client goes (SIGHUP, then SIGKILL after kill_grace), when
// the task's attempt ends (TaskEnded), or when the stream that opened it is
// gone (DropTag). Sessions are named by (tag, id): the tag is the stream
// that opened them, so a new server's ids never meet an old one's.
//
// Orders are started on the exec thread (the account, cgroups and spawn take
// file system calls that may block), never on the caller's: the agent's
// stream from the server is not held up by them. The agent ignores SIGPIPE
// (the constructor sets it): input for a command that closed its stdin is
// dropped, counted as taken.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/supervisor.h"
#include "agent/task.h"

namespace trainyard::agent {

// v1::ExecOpen.
struct ExecOrder {
  uint64_t id = 0;
  TaskKey key;
  std::vector<std::string> command;
  bool tty = false;
  bool stdin = false;
  int rows = 0;
  int cols = 0;
  std::string term;
  std::string user;  // who asked, for the log
  int64_t window_bytes = 256 << 10;
};

// v1::ExecInput.
struct ExecFeed {
  uint64_t id = 0;
  std::string data;
  bool eof = false;
  int rows = 0;
  int cols = 0;
  int64_t acked = 0;
  bool close = false;
};

// v1::ExecOutput.
struct ExecPiece {
  uint64_t id = 0;
  uint64_t tag = 0;  // the Open's tag
  std::string data;
  bool is_stderr = false;
  int64_t offset = 0;
  bool started = false;
  int attempt = 0;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  std::string error;
  int64_t input_taken = 0;
  // With exited and an error before the command ran: its kind
  // (absl::StatusCode; 0: not a refusal).
  int code = 0;
};

struct TaskExecOptions {
  int max_sessions = 64;              // on this node at once
  int64_t chunk_bytes = 32 << 10;     // the most one piece carries
  int64_t max_input_bytes = 1 << 20;  // input held for a command that does not read it
  absl::Duration kill_grace = absl::Seconds(2);  // SIGHUP → SIGKILL
};

class TaskExec {
 public:
  // The running attempt of a task (Supervisor::ExecTargetOf). Called with
  // the exec lock held: it must not call back into TaskExec.
  using Resolve = std::function<absl::StatusOr<ExecTarget>(const TaskKey&)>;
  // Called on the exec thread, one piece at a time; false: it could not be
  // sent (the session is ended).
  using Sink = std::function<bool(const ExecPiece&)>;

  TaskExec(Resolve resolve, TaskExecOptions options, Sink sink);
  // Shutdown.
  ~TaskExec();
  // Kills every session's process group, reaps them and stops the thread:
  // the sink and the resolver are not called after it returns. Later calls
  // do nothing.
  void Shutdown();

  // Starts `order`'s command (on the exec thread); a piece with `started`
  // (and the attempt), or one that has `exited` with the error, goes to the
  // sink.
  void Open(const ExecOrder& order, uint64_t tag);
  // Input, a resize, an acknowledgement or the client's going for session
  // (tag, feed.id) (unknown ones are ignored: the session has ended).
  void Feed(const ExecFeed& feed, uint64_t tag);
  // The task's attempt ended: its sessions end, their commands killed.
  void TaskEnded(const TaskKey& key);
  // The stream that opened sessions with `tag` is gone: they end.
  void DropTag(uint64_t tag);
  int sessions() const;

 private:
  struct Session;
  using Key = std::pair<uint64_t, uint64_t>;  // (tag, id)
  // A final piece of a command killed by a signal, to be told apart (the
  // attempt's end killed it?) once the lock is released.
  struct EndCheck {
    size_t piece = 0;
    TaskKey key;
    int attempt = 0;
  };
  void Run();
  void Wake();
  // Resolves and spawns one order (on the exec thread, without the lock).
  void Start(const ExecOrder& order, uint64_t tag);
  // A refusal for the sink.
  void Refuse(const ExecOrder& order, uint64_t tag, const absl::Status& why);
  // One pass over the sessions after poll: reads, writes, reaps, ends.
  void Service(absl::Time now, std::vector<ExecPiece>* out, std::vector<EndCheck>* checks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads what one output has (within the window); false at its end.
  bool ReadOutput(Session& s, int& fd, bool is_stderr, std::vector<ExecPiece>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteInput(Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reap(Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FeedLocked(Session& s, const ExecFeed& feed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kills the session's process group: SIGHUP first when `hangup`, else
  // SIGKILL at once.
  void Stop(Session& s, const std::string& why, bool hangup, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Resolve resolve_;
  const TaskExecOptions options_;
  const Sink sink_;
  int wake_fd_ = -1;

  mutable absl::Mutex mu_;
  std::map<Key, std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<ExecOrder, uint64_t>> opens_ ABSL_GUARDED_BY(mu_);  // orders and their tags, not started
  std::deque<ExecPiece> outbox_ ABSL_GUARDED_BY(mu_);  // refusals and starts, sent by the thread in order
  Key starting_ ABSL_GUARDED_BY(mu_){0, 0};  // the order Start works on now
  // Feeds for orders not started yet, applied when they are.
  std::map<Key, std::vector<ExecFeed>> early_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace trainyard::agent
