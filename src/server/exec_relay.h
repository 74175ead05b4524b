// ExecRelay: the server's half of `trainyard exec`. A client's stream opens
// a session on the node that runs the task (v1::ExecOpen on the agent's
// stream); the agent starts the command in the task's running attempt
// (agent/task_exec.h) and pushes its output, which the relay queues for the
// client's stream; the client's input goes the other way.
//
// Pacing, both ways, so neither end can fill the server: the agent sends at
// most window_bytes of output beyond what the client's stream has written
// (the relay acknowledges as it writes), and the relay asks for the
// client's next message only while less than input_window_bytes of input
// is on its way to the command and not taken by it (CanRead).
//
// Bounds: at most max_sessions sessions, max_sessions_per_user of them for
// one user (RESOURCE_EXHAUSTED naming the limit), a command of at most
// kMaxCommandBytes. No thread is held per session.
//
// Like the log hub, the relay knows the rest of the server only through
// LogBackend (where the task is, a way to message its node), and its one
// mutex is never held while it calls out (the backend, a sink).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/service.pb.h"
#include "server/logs/log_hub.h"
#include "server/stats.h"

namespace trainyard::server {

// A session's client stream.
class ExecSink {
 public:
  virtual ~ExecSink() = default;
  // Next has something (a response, or the end), or CanRead turned true.
  // Called on any thread, never with the relay's lock held.
  virtual void Ready() = 0;
};
using ExecSinkPtr = std::shared_ptr<ExecSink>;

struct ExecRelayOptions {
  int max_sessions = 256;
  int max_sessions_per_user = 16;  // 0: no per-user limit
  int64_t window_bytes = 256 << 10;        // output sent by the agent, not yet written
  int64_t input_window_bytes = 256 << 10;  // input sent to the agent, not yet taken
};

struct ExecNext {
  enum class Kind { kNothing, kResponse, kEnd };
  Kind kind = Kind::kNothing;
  v1::ExecResponse response;  // kResponse: write it, then call Written
  absl::Status end;           // kEnd: finish the stream with it
};

class ExecRelay {
 public:
  // The most bytes of a command's arguments.
  static constexpr int64_t kMaxCommandBytes = 64 << 10;

  // REQUIRES: backend outlives the relay.
  ExecRelay(LogBackend* backend, ExecRelayOptions options);
  ~ExecRelay();

  // Opens a session for `start`, asked by `user` (who has been authorized
  // for the job): sends the node its order. Errors: InvalidArgument naming
  // the field; NotFound for an unknown job or task; FailedPrecondition for
  // a task not running now; Unavailable when its node is not connected;
  // RESOURCE_EXHAUSTED past a limit.
  // `job_id`: the id of the job the caller was authorized for (0: any); a
  // job of the name with another id (deleted and submitted again since)
  // is NotFound.
  absl::StatusOr<uint64_t> Open(const v1::ExecStart& start, ExecSinkPtr sink, const std::string& user,
                                uint64_t job_id = 0);
  // The client's next message (input, its end, a new terminal size).
  void Input(uint64_t id, const v1::ExecRequest& request);
  // Whether the client's next message may be read now; when not, the sink's
  // Ready follows once it may.
  bool CanRead(uint64_t id);
  // The next response or the end; kNothing while one is being written or
  // none waits (Ready follows when one does).
  ExecNext Next(uint64_t id);
  // The response Next returned has been written.
  void Written(uint64_t id);
  // The client's stream is gone: the command is hung up on.
  void Close(uint64_t id);

  // A piece of node's agent; false when it is not one of the relay's.
  bool OnExecOutput(const std::string& node, const v1::ExecOutput& output);
  // The node's stream is gone: its sessions end, UNAVAILABLE (and, should
  // the node have a new stream already, are hung up on there).
  void OnNodeDisconnected(const std::string& node);

  ExecRelayStats Stats() const;

 private:
  struct Session;
  struct Effects;
  void Execute(Effects& fx);
  void EndLocked(Session& s, absl::Status status, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  LogBackend* const backend_;
  const ExecRelayOptions options_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> by_user_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_);
  int64_t opened_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace trainyard::server
