// Private records of LogHub, shared by log_hub.cc (streams, notifications,
// the thread) and log_hub_follow.cc (what each follower does as its tasks'
// attempts come and go).
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/logs/log_hub.h"

namespace trainyard::server {

// Request ids of the hub's subscriptions have this bit set (the manager's
// one-off log reads do not), so an agent's LogData finds its way.
inline constexpr uint64_t kHubRequestBit = 1ull << 63;

// One output (stdout or stderr) of a task's current attempt.
struct LogHub::Output {
  bool err = false;
  uint64_t request = 0;      // live subscription on the agent (0: none)
  bool follow_sub = false;   // it follows (else it reads what is there, to eof)
  int64_t received = 0;      // bytes of the attempt received from the agent
  int64_t taken = 0;         // ... of them written to the client
  int64_t acked = 0;         // ... acknowledged to the agent
  bool finished = false;     // read to its end
  // The request's tail/since applies (the task's first attempt read): the
  // agent decides where reading starts and its first piece tells.
  bool seek = false;
};

struct LogHub::TaskCursor {
  std::string role;
  int index = 0;
  std::string name;          // JOB-ROLE-INDEX
  int attempt = -1;          // being read (-1: none yet)
  std::string node;          // that keeps it
  Output out;
  Output err{.err = true};
  bool done = false;
  int attempts_begun = 0;
};

// A chunk waiting for the client. task -1: not of a task's output.
struct LogHub::Queued {
  v1::LogChunk chunk;
  int task = -1;
  bool err = false;
  int64_t end_offset = 0;  // of the output, after this chunk
};

struct LogHub::Follower {
  uint64_t id = 0;
  v1::LogsRequest req;
  uint64_t job_id = 0;  // of the job it opened (JobLogPlaces::job_id)
  std::string user;  // whose stream it is (its limits count it)
  LogSinkPtr sink;
  std::vector<TaskCursor> tasks;
  int64_t window = 0;  // per output
  std::deque<Queued> queue;
  int64_t queued_bytes = 0;
  std::optional<Queued> in_write;  // taken by Next, not yet Written
  bool wants = false;              // its sink waits for Ready
  // Since when the client has had data waiting that it did not take.
  absl::Time waiting_since = absl::InfiniteFuture();
  std::optional<absl::Status> end;  // decided; delivered after the queue
  bool cut_off = false;             // ... or at once

  bool follow() const { return req.follow(); }
  bool pinned() const { return req.attempt() >= 0; }  // one given attempt
};

struct LogHub::SubRef {
  uint64_t follower = 0;
  int task = 0;
  bool err = false;
  std::string node;
  std::string user;  // the follower's
};

struct LogHub::JobEntry {
  std::set<uint64_t> followers;
  int opening = 0;       // Opens looking the job up now
  bool changed = false;  // ... and it changed meanwhile: look it up again
  std::optional<JobLogPlaces> places;  // the last lookup
};

struct LogHub::Effects {
  std::vector<std::pair<std::string, v1::ServerMessage>> sends;  // node, message
  std::vector<LogSinkPtr> ready;
};

}  // namespace trainyard::server
