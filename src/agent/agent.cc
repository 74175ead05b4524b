// agent::Agent (agent.h): the daemon's parts in their order of start and stop.
#include "agent/agent.h"

#include "absl/strings/match.h"
#include "agent/agent_metrics.h"
#include "api/node_address.h"
#include "common/logging.h"

namespace trainyard::agent {

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options) {
  if (options.config.address.empty() && !absl::StartsWith(options.link.server, "unix:")) {
    // Of a list of servers (an etcd store's), the first: they share a network.
    absl::StatusOr<std::string> local =
        api::LocalAddressToward(options.link.server.substr(0, options.link.server.find(',')));
    if (local.ok()) {
      options.config.address = *local;
    } else {
      Log(LogLevel::kWarning, "agent", "no --address, and none toward the server (%s): the node name is its address",
          std::string(local.status().message()));
    }
  }
  options.link.clock = options.config.clock;
  std::unique_ptr<Agent> agent(new Agent());
  agent->link_ = std::make_unique<ServerLink>(std::move(options.link));
  // The core makes the data dir absolute: tasks start in other directories.
  absl::StatusOr<std::unique_ptr<AgentCore>> core = AgentCore::Start(options.config, agent->link_.get());
  // Not InvalidArgument: the node cannot run as configured (its GPUs, its
  // memory, a value out of range), which the verb reports as a failure.
  if (!core.ok()) return absl::FailedPreconditionError(core.status().message());
  agent->core_ = *std::move(core);
  // Its /metrics (public, like the server's; loopback unless a host is named).
  if (!options.http_listen.empty()) {
    absl::StatusOr<std::unique_ptr<httpd::HttpServer>> served = ServeAgentMetrics(options.http_listen, agent->core_.get());
    if (!served.ok()) return absl::InvalidArgumentError(served.status().message());
    agent->http_ = *std::move(served);
    Log(LogLevel::kInfo, "agent", "/metrics on http://%s/metrics", agent->http_->address());
  }
  agent->link_->Start(agent->core_.get());
  agent->started_ = true;
  return agent;
}

Agent::~Agent() {
  if (started_ && !stopped_) Stop("", /*kill_tasks=*/false);
}

void Agent::Stop(const std::string& why, bool kill_tasks) {
  stopped_ = true;
  if (kill_tasks) {
    // Said first, on the stream the tasks' ends then follow: the server
    // takes their ends as a stop with the node (jobs requeued, no restart
    // charged), not as failures.
    bool announced = link_->AnnounceStop(why);
    core_->supervisor().KillAll();
    if (!core_->supervisor().WaitAllEnded(absl::Seconds(15))) {
      Log(LogLevel::kWarning, "agent", "tasks of this node still run 15 s after they were killed");
    }
    // Until the server has taken in those ends (they would otherwise be lost
    // with a server stopped right after, as `trainyard up` does).
    if (announced && !link_->WaitDrained(absl::Seconds(5))) {
      Log(LogLevel::kWarning, "agent", "the server did not confirm the stop of this node's tasks");
    }
  }
  if (http_) http_->Stop();
  link_->Stop();
}

}  // namespace trainyard::agent
