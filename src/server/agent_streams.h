// AgentStreams: today's execution backend — each node's agent over one
// bidirectional gRPC stream (AgentService's reactor is the AgentLink). It
// turns the control state's orders into ServerMessages on the node's
// stream, and numbers connections so the control state can tell an agent
// that reconnected from one that is gone. Not thread-safe: the shell calls
// it under its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "proto/service.pb.h"
#include "server/execution_backend.h"
#include "server/master_orders.h"

namespace trainyard::server {

// One connected agent's stream. Send never blocks.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual void Send(v1::ServerMessage msg) = 0;
};

class AgentStreams : public ExecutionBackend {
 public:
  // A job's credential by its id (security::ServerSecurity).
  using JobCredentials = std::function<std::string(uint64_t job_id)>;
  // The key of each job's checkpoint orders' MAC (OrderCheckpoint): its
  // credential, which only its master task holds. What a launch carries is
  // not decided here: LaunchContract (launch_contract.h) completes it first.
  void SetOrderKeys(JobCredentials of) { job_credentials_ = std::move(of); }

  // The session number of `link` (a new one, never 0, the first time).
  uint64_t SessionOf(AgentLink* link);
  // `link` now speaks for `node` (nullptr: nothing does). Returns the link
  // that did before.
  AgentLink* Bind(const std::string& node, AgentLink* link);
  // `link`'s stream closed: it no longer speaks for anything.
  void Forget(const std::string& node, AgentLink* link);

  void Registered(const std::string& node, const v1::Registered& ack) override;
  void Launch(const std::string& node, v1::TaskSpec task) override;
  void Kill(const std::string& node, const v1::KillTask& kill) override;
  void UpdateFiles(const std::string& node, const v1::TaskFiles& files) override;
  void Drained(const std::string& node) override;
  // Pushes the order to the master's port (MasterOrders), its MAC keyed by
  // the job's credential, which only the master task holds. Without job
  // credentials (a server run with --no-auth) masters take no pushed
  // orders: nothing is sent.
  void OrderCheckpoint(const std::string& job_master, uint64_t job_id, const std::string& job,
                       const v1::CheckpointOrder& order) override;
  bool ReadLog(const std::string& node, v1::LogRead read) override;
  bool AckLog(const std::string& node, v1::LogAck ack) override;
  bool CancelLog(const std::string& node, v1::LogCancel cancel) override;
  bool OpenExec(const std::string& node, v1::ExecOpen open) override;
  bool ExecInput(const std::string& node, v1::ExecInput input) override;
  // Sends `msg` on node's stream; false when it has none.
  bool Send(const std::string& node, v1::ServerMessage msg);
  // Called before any order leaves (a launch, kill, file update, log read,
  // checkpoint push). A server that may no longer lead (its lease may have
  // ended while it was paused) does not return from it: a deposed leader
  // neither launches nor kills anything.
  void SetFence(std::function<void()> check) { fence_ = std::move(check); }
  // How many agents have a stream bound to their node.
  size_t connected() const { return links_.size(); }

 private:
  std::map<std::string, AgentLink*> links_;   // node -> its stream
  std::map<AgentLink*, uint64_t> sessions_;   // stream -> session number
  uint64_t next_session_ = 1;
  JobCredentials job_credentials_;
  MasterOrders master_orders_;
  std::function<void()> fence_;
};

}  // namespace trainyard::server
