// HeartbeatDelta: what an agent leaves out of its heartbeats. Between two
// changes a node's GPU and port use stay the same for minutes, and at
// 10,000 nodes a beat a second each, sending and parsing them whole every
// second is most of what heartbeats cost (docs/agent.md, "Heartbeats").
// A delta heartbeat leaves out the busy-GPU mask and the ports in use when
// they are what the last full heartbeat said, and the data dir's free space
// when it has not moved (Heartbeat.use_unchanged); a full one goes when
// they change, as a stream's first, and every `full_every` beats. The task
// list is never touched. One per stream: a new stream starts with a full one.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "proto/service.pb.h"

namespace trainyard::agent {

class HeartbeatDelta {
 public:
  // `full_every`: Registered.full_heartbeat_every of this stream's server;
  // 0 (a server that takes only full heartbeats) leaves every beat whole.
  explicit HeartbeatDelta(int full_every) : full_every_(full_every) {}

  // Turns the full report `hb` into what this beat sends: unchanged, or a
  // delta (use_unchanged set, the unchanged fields cleared). Returns whether
  // it is a full report.
  bool Apply(v1::Heartbeat* hb);

 private:
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
  const int full_every_;
  int since_full_ = 0;  // deltas sent since the last full report
  bool sent_ = false;   // a full report was sent on this stream
  uint64_t busy_ = 0;
  Ranges ports_;
  std::optional<int64_t> data_free_mb_;  // as last sent
};

}  // namespace trainyard::agent
