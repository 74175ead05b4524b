// LogHub: the server's log streams (`trainyard logs`, with or without -f).
// A stream ("follower") reads one task of a job, or all of them. For each
// task it holds one subscription per output (stdout, stderr) on the agent of
// the node that keeps the attempt's log; agents push what there is and, when
// following, what the task writes next. The hub hands it on as the client
// takes it. Following with the latest attempt goes on across the task's
// restarts — by its agent, or a relaunch on another node — each new attempt
// read from offset 0, until the job has ended and every task's last attempt
// has been read to its end.
//
// Bounds: at most max_followers streams, and at most max_followers_per_user
// of them for one user (one more is refused with RESOURCE_EXHAUSTED naming
// the limit; other users' streams are still served). On each node at most
// node_subscriptions subscriptions, and at most
// node_subscriptions_per_user of them for one user, so one user's streams
// never take all of a node's (the agent's own cap, 1024, is above the
// hub's, so the agent never refuses what the hub let through); a task whose subscription would pass either
// ends its part of the stream with RESOURCE_EXHAUSTED naming the limit.
// Refusals are counted (Stats, /metrics). Each subscription may have at most a
// window of bytes that the client has not taken (a follower's
// follower_buffer_bytes split among its task outputs); the agent waits for
// the client, and what it has not sent stays in the log file on the node. A
// follower whose client takes nothing for stall_timeout while data waits for
// it is cut off with RESOURCE_EXHAUSTED. No thread is held per follower.
//
// The hub knows the rest of the server only through LogBackend (where tasks
// are; a way to message a node) and the notifications it is given. Its one
// mutex is never held while it calls out (the backend, a sink), so callers
// may notify it under their own locks. Work a notification calls for that
// needs the backend runs on the hub's own thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/service.pb.h"
#include "server/logs/log_places.h"
#include "server/stats.h"

namespace trainyard::server {

// What the hub needs from the server's job and node state.
class LogBackend {
 public:
  virtual ~LogBackend() = default;
  // Where the tasks of `job` are now. NotFound naming the job.
  virtual absl::StatusOr<JobLogPlaces> Places(const std::string& job) = 0;
  // To the agent of `node`: a task's log read (a follower's subscription or
  // a one-off read), its acknowledgement and its cancel; a `trainyard exec`
  // session's open and its input, handed over (not copied: an input carries
  // the client's bytes). False when the node is not connected. None may
  // block.
  virtual bool ReadLog(const std::string& node, v1::LogRead read) = 0;
  virtual bool AckLog(const std::string& node, v1::LogAck ack) = 0;
  virtual bool CancelLog(const std::string& node, v1::LogCancel cancel) = 0;
  virtual bool OpenExec(const std::string& node, v1::ExecOpen open) = 0;
  virtual bool ExecInput(const std::string& node, v1::ExecInput input) = 0;
};

// Gives `msg` (one of the orders above, as the hub and the exec relay queue
// them) to the backend's call for it; false for any other message.
bool SendStreamOrder(LogBackend& backend, const std::string& node, v1::ServerMessage msg);

// A follower's client stream.
class LogSink {
 public:
  virtual ~LogSink() = default;
  // The hub has something for the stream (a chunk, or its end): call
  // LogHub::Next. Called on any thread, never with the hub's lock held, at
  // most once per Next that returned kNothing (and once more when the
  // follower is cut off).
  virtual void Ready() = 0;
};
using LogSinkPtr = std::shared_ptr<LogSink>;

struct LogHubOptions {
  int max_followers = 1000;
  int max_followers_per_user = 64;         // 0: no per-user limit
  int node_subscriptions = 1000;           // per node
  int node_subscriptions_per_user = 128;   // per node and user; 0: no limit
  int64_t follower_buffer_bytes = 4 << 20;
  int64_t chunk_bytes = 64 << 10;  // the most one LogChunk carries
  absl::Duration stall_timeout = absl::Seconds(60);
  bool start_thread = true;  // false: tests call RunPendingForTest / SweepForTest
};

// What LogHub::Next has for a follower.
struct LogNext {
  enum class Kind { kNothing, kChunk, kEnd };
  Kind kind = Kind::kNothing;
  v1::LogChunk chunk;  // kChunk: write it, then call Written
  absl::Status end;    // kEnd: finish the stream with it
};

class LogHub {
 public:
  // REQUIRES: backend and clock outlive the hub.
  LogHub(LogBackend* backend, const Clock* clock, LogHubOptions options);
  ~LogHub();

  // ---- streams ----
  // Opens a follower for `request`, counted against `user` (the caller's
  // principal; for an anonymous caller, the job's owner). Errors:
  // RESOURCE_EXHAUSTED naming the limit (the server's or the user's);
  // NotFound for an unknown job or a task it does not have;
  // InvalidArgument without a job. The caller then calls Next.
  absl::StatusOr<uint64_t> Open(const v1::LogsRequest& request, LogSinkPtr sink, const std::string& user);
  // The next chunk or the end for the follower; kNothing while a chunk is
  // being written (unless the follower was cut off) or none waits (Ready
  // follows when one does). Never calls a sink.
  LogNext Next(uint64_t follower);
  // The chunk Next returned has been written.
  void Written(uint64_t follower);
  // The stream is gone: its subscriptions end.
  void Close(uint64_t follower);

  // ---- notifications ----
  // A piece pushed by node's agent. False when `data` is not for the hub
  // (its request id is not one of the hub's).
  bool OnLogData(const std::string& node, const v1::LogData& data);
  // Something about the job changed (a task's attempt, node or state; the
  // job's state).
  void OnJobChanged(const std::string& job);
  void OnNodeConnected(const std::string& node);
  void OnNodeDisconnected(const std::string& node);

  LogHubStats Stats() const;
  // The thread's work, run on the caller's thread.
  void RunPendingForTest() { RunPending(); }
  void SweepForTest() { Sweep(); }

 private:
  struct Output;
  struct TaskCursor;
  struct Queued;
  struct Follower;
  struct SubRef;
  struct JobEntry;
  struct Effects;

  void Run();
  void RunPending();
  void Sweep();
  // Sends and wakes what `fx` holds; a failed send of a subscription marks
  // its node down and moves its follower on.
  void Execute(Effects fx);
  void SendFailed(const std::string& node, uint64_t request, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the subscriptions on `node` (its agent dropped them with its
  // stream) and looks again at the followers that read from it.
  void DropSubsOnLocked(const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time NextStallLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- per follower (log_hub_follow.cc) ----
  void Apply(Follower& f, const JobLogPlaces& places, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Advance(Follower& f, int task, const TaskLogPlace& place, bool job_done, Effects& fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Advance with the places last looked up for the follower's job.
  void AdvanceCached(Follower& f, int task, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BeginAttempt(Follower& f, int task, const std::string& node, int attempt, Effects& fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A subscription on the task's node; false (nothing sent) when the node's
  // or the user's share of it is full, with the reason in *why.
  bool Subscribe(Follower& f, int task, Output& out, bool follow, Effects& fx, absl::Status* why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets subscription `it` (and its count against its node and user).
  std::map<uint64_t, SubRef>::iterator EraseSub(std::map<uint64_t, SubRef>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseSub(uint64_t request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stream of `user` has ended (or was never opened).
  void StreamGone(const std::string& user) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unsubscribe(Output& out, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A piece (or the end) pushed for `out` of task `task`.
  void Take(Follower& f, int task, Output& out, const v1::LogData& data, Effects& fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TaskFails(Follower& f, int task, const absl::Status& why, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Queue(Follower& f, Queued item, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeComplete(Follower& f, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the follower: after what is queued (at_once false) or at once
  // (cut off: the queue is dropped).
  void End(Follower& f, const absl::Status& status, bool at_once, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  LogBackend* const backend_;
  const Clock* const clock_;
  const LogHubOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<uint64_t, std::unique_ptr<Follower>> followers_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, SubRef> subs_ ABSL_GUARDED_BY(mu_);  // agent request id -> its output
  std::map<std::string, JobEntry> jobs_ ABSL_GUARDED_BY(mu_);  // followed jobs
  std::set<std::string> pending_jobs_ ABSL_GUARDED_BY(mu_);    // changed: look up again
  std::set<std::string> down_nodes_ ABSL_GUARDED_BY(mu_);      // known not to be connected
  int live_ ABSL_GUARDED_BY(mu_) = 0;  // followers open and not ended (and being opened)
  std::map<std::string, int> user_live_ ABSL_GUARDED_BY(mu_);  // ... by user
  std::map<std::string, int> node_subs_ ABSL_GUARDED_BY(mu_);  // subscriptions by node
  // ... by node and user
  std::map<std::pair<std::string, std::string>, int> node_user_subs_ ABSL_GUARDED_BY(mu_);
  int64_t refused_total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_user_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_node_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_user_node_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_follower_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_request_ ABSL_GUARDED_BY(mu_);
  int64_t cut_off_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time thread_wakes_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace trainyard::server
