// The agent side of the server's gRPC API: one bidirectional stream per
// agent (registration, heartbeats and task status up; launch, kill and log
// reads down), served with the callback API so a thousand agents cost no
// thread each.
#pragma once

#include "proto/service.grpc.pb.h"
#include "server/agent_streams.h"
#include "server/exec_relay.h"
#include "server/job_manager.h"
#include "server/logs/log_hub.h"

namespace trainyard::server {

class AgentService final : public v1::AgentChannel::CallbackService {
 public:
  // `logs` (may be null) gets the agents' log pushes and hears of their
  // streams coming and going. With `node_identity` (the listener serves
  // TLS), an agent registers only the node its verified certificate names:
  // none is UNAUTHENTICATED, another name PERMISSION_DENIED.
  // `exec` (may be null) gets the agents' pieces of commands run in tasks.
  // Each stream is opened and closed in `streams` (the manager's backend),
  // which sends it the node's orders once its registration is accepted.
  AgentService(JobManager* manager, AgentStreams* streams, LogHub* logs, bool node_identity = false,
               ExecRelay* exec = nullptr)
      : manager_(manager), streams_(streams), logs_(logs), node_identity_(node_identity), exec_(exec) {}
  grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  JobManager* const manager_;
  AgentStreams* const streams_;
  LogHub* const logs_;
  const bool node_identity_;
  ExecRelay* const exec_;
};

}  // namespace trainyard::server
