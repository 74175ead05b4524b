// LinkState: what the agent's link to the server remembers across its
// streams, decided without I/O, threads or a clock of its own (`now` is
// given), so its rules are tested with explicit time (link_state_test.cc).
// The agent's ServerLink holds one under its lock and does the writing; the
// server's tests speak through one as their agent (control_link_test.cc), so
// the two sides of the protocol are tested against each other. Its rules:
// - A task's status is written at once while a stream is registered and
//   nothing older waits; else it is buffered (at most `max_buffered`, the
//   oldest dropped first) and replayed, in order, when the next stream
//   registers, before any status that comes after.
// - A task's end is also repeated in the heartbeats of every stream, for
//   kRepeatEndsFor from the first heartbeat of that stream that carried it:
//   a server that restarted, however long it was down, hears of the ends it
//   may not have kept (docs/agent.md, "Launches and heartbeats").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::api {

class LinkState {
 public:
  static constexpr absl::Duration kRepeatEndsFor = absl::Seconds(15);

  explicit LinkState(size_t max_buffered) : max_buffered_(max_buffered) {}

  // A task's status report (`msg.status()`; `final`: the task ended). True:
  // write it now; false: it waits in the buffer. An end is kept for the
  // heartbeats either way.
  bool OnStatus(const v1::AgentMessage& msg, bool final);
  // A report OnStatus said to write could not be written (the stream
  // broke): it waits for the next stream, behind what waits already.
  void WriteFailed(v1::AgentMessage msg);

  // A stream registered: what waits is replayed first (TakeReplay), and
  // reports wait behind it until the replay finds nothing left.
  void Registered();
  // The next reports to replay, oldest first. Empty when none is left: the
  // replay is over and reports are written at once from then on.
  std::deque<v1::AgentMessage> TakeReplay();
  // The stream broke during the replay: `rest` (taken, not written) goes
  // back ahead of whatever was buffered meanwhile, and the replay ends.
  void ReplayBroke(std::deque<v1::AgentMessage> rest);
  // The stream ended: reports wait for the next one.
  void Disconnected();

  // The ends a heartbeat of stream `session` carries at `now` (appended to
  // `hb`'s tasks); the ends repeated long enough in it are dropped.
  void AddRecentEnds(int64_t session, absl::Time now, v1::Heartbeat* hb);

  size_t buffered() const { return buffered_.size(); }
  size_t recent_ends() const { return recent_ends_.size(); }

 private:
  void Buffer(v1::AgentMessage msg);

  const size_t max_buffered_;
  bool registered_ = false;
  bool replaying_ = false;
  std::deque<v1::AgentMessage> buffered_;
  struct RecentEnd {
    v1::TaskStatus status;
    int64_t session;   // the stream whose heartbeats carry it now (-1: none yet)
    absl::Time since;  // its first heartbeat on that stream
  };
  std::deque<RecentEnd> recent_ends_;
};

}  // namespace trainyard::api
