// ExecutionBackend: the seam between the control state and where tasks
// run. The control state decides (launch this task on that node, kill that
// one, rewrite its files) and says so through this interface;
// it never touches a socket. Today's backend is AgentStreams
// (agent_streams.h): each node's agent over one gRPC stream. Another
// backend (Kubernetes pods, say) implements the same calls and reports
// back through the same ControlState events (task status, heartbeats).
// Every call is fire-and-forget: it never blocks and never calls back into
// the control state; answers arrive later as events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/service.pb.h"

namespace trainyard::server {

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;
  // The node's registration by connection `session` (the number its door
  // gave the control state with it) was accepted: the node's orders go to
  // that connection from now on, and `ack` (heartbeat interval, the name it
  // is known by) is the first of them. A refused registration is never
  // told: the node's orders go on to where they went.
  virtual void Registered(const std::string& node, uint64_t session, const v1::Registered& ack) = 0;
  // Start a task (the whole launch: command, env, files, allocation). The
  // spec is handed over, not copied: a launch is thousands of bytes.
  virtual void Launch(const std::string& node, v1::TaskSpec task) = 0;
  // Stop a task: SIGTERM, then SIGKILL after kill.grace_ms.
  virtual void Kill(const std::string& node, const v1::KillTask& kill) = 0;
  // Rewrite a running task's files (hosts, job master address).
  virtual void UpdateFiles(const std::string& node, const v1::TaskFiles& files) = 0;
  // A node that said it is stopping (Draining) has no task left that the
  // server knows of: its agent may go. A backend whose nodes never drain
  // need not implement it.
  virtual void Drained(const std::string& /*node*/) {}
  // The job's master task, at `job_master` (host:port), is to hear of its
  // order to checkpoint now (docs/jobmaster.md, "Checkpoints"). A backend
  // that cannot reach masters need not implement it: a master also hears of
  // its order in the answer to its next figures report (every 2 s).
  virtual void OrderCheckpoint(const std::string& /*job_master*/, uint64_t /*job_id*/, const std::string& /*job*/,
                               const v1::CheckpointOrder& /*order*/) {}
  // A task's log read for a follower (`trainyard logs -f`, the dashboard)
  // or a one-off read, its acknowledgement and cancel; `trainyard exec`'s
  // session, opened and fed. The log hub and the exec relay give them
  // (server/logs/log_hub.h), handed over like a launch (an input carries
  // the client's bytes). False when the node has no connection now: the
  // caller ends or moves the stream. A backend that streams neither
  // returns false, and logs and exec say the node cannot be reached.
  virtual bool ReadLog(const std::string& /*node*/, v1::LogRead /*read*/) { return false; }
  virtual bool AckLog(const std::string& /*node*/, v1::LogAck /*ack*/) { return false; }
  virtual bool CancelLog(const std::string& /*node*/, v1::LogCancel /*cancel*/) { return false; }
  virtual bool OpenExec(const std::string& /*node*/, v1::ExecOpen /*open*/) { return false; }
  virtual bool ExecInput(const std::string& /*node*/, v1::ExecInput /*input*/) { return false; }
  // How many nodes it can reach now (agents with a registered stream open),
  // for the server's figures.
  virtual size_t Connected() const { return 0; }
};

}  // namespace trainyard::server
