// What the server counts about itself, for /metrics and tests: the control
// state's counters (ManagerStats, bumped under the shell's lock), and the
// snapshot the shell publishes to the ViewStore with them (PublishedStats),
// which the HTTP API reads without that lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "common/histogram.h"
#include "store/state_store.h"

namespace trainyard::server {

struct ManagerStats {
  int64_t submitted = 0;
  int64_t rounds = 0;
  int64_t placements = 0;  // tasks placed by a round or moved to another node
  int64_t heartbeats = 0;
  int64_t preemptions = 0;  // jobs chosen as victims
  int64_t requeues = 0;     // jobs sent back to the queue (preempted, or a lost node's)
  // Task restarts by cause: the agent started it again after it ended
  // (exit), the agent no longer ran it (lost), it moved off a lost node.
  int64_t restarts_exit = 0;
  int64_t restarts_lost = 0;
  int64_t restarts_node_lost = 0;
  // Ended task attempts by (queue, class: "FAILED", "OOM_KILLED", ...; see
  // api/restart_budgets.h): bounded by queues times classes, never per job.
  std::map<std::pair<std::string, std::string>, int64_t> attempts_ended;
  // How long each job waited in the queue before a placement (from its
  // submission or its return to the queue).
  Histogram pending_seconds{0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};
  // Time between two heartbeats of one node: a node with nothing new beats
  // every quiet interval (docs/agent.md); above it is lag (a slow agent, a
  // slow network, a busy server).
  Histogram heartbeat_gap_seconds{0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60};
};

// The log hub's streams and refusals (server/logs/log_hub.h), for /metrics.
// `exec` sessions the server relays (exec_relay.h).
struct ExecRelayStats {
  int open = 0;         // open now
  int64_t opened = 0;   // since the server started
  int64_t refused = 0;  // by the limits (in all, per user)
};

struct LogHubStats {
  int followers = 0;         // streams open and not ended
  size_t subscriptions = 0;  // on agents
  int64_t buffered_bytes = 0;
  int64_t cut_off = 0;       // followers cut off for not reading
  // Streams refused at Open: the server's limit, the user's.
  int64_t refused_total = 0;
  int64_t refused_user = 0;
  // Task subscriptions refused: the node's limit, the user's on the node.
  int64_t refused_node = 0;
  int64_t refused_user_node = 0;
};

// The server's counters as last published (JobManager's loop, with the
// node and queue views).
struct PublishedStats {
  ManagerStats manager;
  StoreStats store;
  // Wall time of each scheduling round (ControlState::RunRound).
  Histogram round_seconds = LatencyHistogram();
  int agents_connected = 0;  // agents with an open stream
};

}  // namespace trainyard::server
