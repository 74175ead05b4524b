// AgentStreams: today's execution backend — each node's agent over one
// bidirectional gRPC stream (AgentService's reactor is the AgentLink). It
// turns the control state's orders into ServerMessages on the node's
// stream, and numbers connections so the control state can tell an agent
// that reconnected from one that is gone. Thread-safe: the agents' reactors
// open and close their streams on gRPC's threads while the shell's turns
// send orders; its lock is a leaf (a link's Send takes only the link's own).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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
  void SetOrderKeys(JobCredentials of);

  // A stream opened: its session number (a new one, never 0, the first
  // time; the same on later calls). The control state is told the number
  // with the stream's registration and disconnect; orders reach the stream
  // once a registration by it is accepted (Registered).
  uint64_t Open(AgentLink* link);
  // `link`'s stream closed: it no longer speaks for anything, and nothing
  // is sent to it once this returns.
  void Close(AgentLink* link);

  // The registration by stream `session` was accepted: the node's orders go
  // to that stream from now on (a newer stream replaces an older one), and
  // the answer is the first of them.
  void Registered(const std::string& node, uint64_t session, const v1::Registered& ack) override;
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
  // Agents with a registered stream open.
  size_t Connected() const override;
  // Sends `msg` on node's stream; false when it has none.
  bool Send(const std::string& node, v1::ServerMessage msg);
  // Called before any order leaves (a launch, kill, file update, log read,
  // checkpoint push). A server that may no longer lead (its lease may have
  // ended while it was paused) does not return from it: a deposed leader
  // neither launches nor kills anything. Set before any stream opens.
  void SetFence(std::function<void()> check) { fence_ = std::move(check); }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, AgentLink*> links_ ABSL_GUARDED_BY(mu_);   // node -> its stream
  struct Stream {
    uint64_t session = 0;
    std::string node;  // the node its accepted registration named ("" none yet)
  };
  std::map<AgentLink*, Stream> streams_ ABSL_GUARDED_BY(mu_);        // open ones
  std::map<uint64_t, AgentLink*> by_session_ ABSL_GUARDED_BY(mu_);  // session number -> open stream
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  JobCredentials job_credentials_ ABSL_GUARDED_BY(mu_);
  MasterOrders master_orders_;  // thread-safe: its own lock and thread
  std::function<void()> fence_;  // set before any stream opens, then only read
};

}  // namespace trainyard::server
