// The node agent as one object: its core (discovery, the supervisor and its
// tasks), its link to the server and its /metrics, started together and
// stopped together. `trainyard agent` (src/cli/agent_verb.cc) only reads
// its flags into AgentOptions, starts an Agent and stops it on a signal.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_core.h"
#include "agent/server_link.h"
#include "httpd/http_server.h"

namespace trainyard::agent {

struct AgentOptions {
  AgentConfig config;      // the core's; config.clock is required
  ServerLinkOptions link;  // the server's agent listener, TLS; its clock is the config's
  std::string http_listen;  // "" = no /metrics
};

class Agent {
 public:
  // Starts the core (FailedPrecondition naming the config field), serves
  // /metrics (InvalidArgument naming http-listen) and connects to the
  // server. With
  // no config.address, the node is reached at the address it reaches the
  // server from (the first of a list), which other hosts can reach, not at
  // its host name, which their resolvers may not know.
  static absl::StatusOr<std::unique_ptr<Agent>> Start(AgentOptions options);
  // Stops as Stop(..., false) would if Stop was not called.
  ~Agent();

  const NodeInfo& node_info() const { return core_->node_info(); }
  // Where /metrics is served ("" when not).
  std::string metrics_address() const { return http_ ? http_->address() : ""; }

  // Stops the agent; its tasks keep running (a restarted agent adopts them)
  // unless `kill_tasks`: then it first tells the server it stops, for
  // `why` (so their ends are a stop with the node, not failures), kills
  // every task, waits up to 15 s for them to end and up to 5 s for the
  // server to take their ends in.
  void Stop(const std::string& why, bool kill_tasks);

 private:
  Agent() = default;

  // Declared first: destroyed after the core, which reports to it.
  std::unique_ptr<ServerLink> link_;
  std::unique_ptr<AgentCore> core_;
  std::unique_ptr<httpd::HttpServer> http_;
  bool started_ = false;  // the link runs
  bool stopped_ = false;
};

}  // namespace trainyard::agent
