// HeartbeatDelta: what an agent leaves out of its heartbeats, and which
// beats it leaves out. Between two changes a node's GPU and port use stay
// the same for minutes, and at 10,000 nodes a beat a second each, sending
// and parsing them whole every second is most of what heartbeats cost
// (docs/agent.md, "Delta heartbeats and quiet beats").
// A delta heartbeat leaves out the busy-GPU mask and the ports in use when
// they are what the last full heartbeat said, and the data dir's free space
// when it has not moved (Heartbeat.use_unchanged); a full one goes when
// they change, as a stream's first, and every `full_every` beats. The task
// list is never touched. One per stream: a new stream starts with a full one.
// A quiet beat (nothing new: the same task list, GPU and port use, no
// images) is not sent at all until `quiet_every` after the last beat sent:
// what a server is told per message costs it more than what the message
// says, so an idle node beats less often and a busy one as often as before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::agent {

class HeartbeatDelta {
 public:
  // `full_every`: Registered.full_heartbeat_every of this stream's server;
  // 0 (a server that takes only full heartbeats) leaves every beat whole.
  // `quiet_every`: Registered.quiet_heartbeat_interval_ms; zero, or a
  // server that takes no deltas, sends every beat.
  explicit HeartbeatDelta(int full_every, absl::Duration quiet_every = absl::ZeroDuration())
      : full_every_(full_every), quiet_every_(quiet_every) {}

  // Whether the full report `hb` (its task list in, before Apply) may be
  // left out at `now`: it says nothing the last beat sent did not (the data
  // dir's free space aside: it goes with the next beat sent) and that beat
  // was sent less than quiet_every ago.
  bool Quiet(const v1::Heartbeat& hb, absl::Time now) const;
  // When a beat goes whatever it says: quiet_every after the last one sent
  // (InfiniteFuture without a quiet interval). A caller that left a beat
  // out looks again then, not at its next tick, so the gap is quiet_every.
  absl::Time QuietUntil() const;

  // Turns the full report `hb` into what this beat sends at `now`:
  // unchanged, or a delta (use_unchanged set, the unchanged fields
  // cleared). Returns whether it is a full report.
  bool Apply(v1::Heartbeat* hb, absl::Time now);

 private:
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
  static Ranges RangesOf(const v1::Heartbeat& hb);
  // The task list as compared between beats: every field but the time
  // (which is the beat's own).
  static std::string TasksKey(const v1::Heartbeat& hb);

  const int full_every_;
  const absl::Duration quiet_every_;
  int since_full_ = 0;  // deltas sent since the last full report
  bool sent_ = false;   // a full report was sent on this stream
  uint64_t busy_ = 0;
  Ranges ports_;
  std::optional<int64_t> data_free_mb_;  // as last sent
  absl::Time last_beat_ = absl::InfinitePast();  // the last beat sent
  std::string tasks_;                            // its TasksKey
};

}  // namespace trainyard::agent
