// The gRPC-stream execution backend (see agent_streams.h).
#include "server/agent_streams.h"

#include "api/roles.h"
#include "api/task_env.h"
#include "common/logging.h"
#include "common/order_mac.h"
#include "security/crypto.h"

namespace trainyard::server {

uint64_t AgentStreams::SessionOf(AgentLink* link) {
  auto [it, added] = sessions_.emplace(link, next_session_);
  if (added) ++next_session_;
  return it->second;
}

AgentLink* AgentStreams::Bind(const std::string& node, AgentLink* link) {
  auto it = links_.find(node);
  AgentLink* before = it == links_.end() ? nullptr : it->second;
  if (link) {
    links_[node] = link;
  } else if (it != links_.end()) {
    links_.erase(it);
  }
  return before;
}

void AgentStreams::Forget(const std::string& node, AgentLink* link) {
  auto it = links_.find(node);
  if (it != links_.end() && it->second == link) links_.erase(it);
  sessions_.erase(link);
}

bool AgentStreams::Send(const std::string& node, v1::ServerMessage msg) {
  if (fence_) fence_();
  auto it = links_.find(node);
  if (it == links_.end()) return false;
  it->second->Send(std::move(msg));
  return true;
}

void AgentStreams::Registered(const std::string& node, const v1::Registered& ack) {
  v1::ServerMessage msg;
  *msg.mutable_registered() = ack;
  Send(node, std::move(msg));
}

void AgentStreams::Launch(const std::string& node, v1::TaskSpec task) {
  if (job_credentials_ && api::IsJobMasterRole(task.role())) {
    (*task.mutable_env())[kJobTokenEnv] = job_credentials_(task.job_id());
  }
  // The secret lets a task register at its job's master: only the master
  // and the tasks given its address get it (a job without a master has
  // nothing to use it for, and an HMAC per launch is not free).
  // The tasks of an MPI job use it too: `trainyard rsh` presents it to the
  // rank host of another node's worker (jobmaster/client/rank_host.h).
  if (job_worker_secrets_ && (api::IsJobMasterRole(task.role()) || task.env().count(kJobMasterEnv) ||
                              task.env().count(api::kMpiRshAgentEnv))) {
    (*task.mutable_env())[kJobSecretEnv] = job_worker_secrets_(task.job_id());
  }
  // What the spec asked for (userCredential): the job's user's credential.
  if (task.user_credential() && job_user_tokens_) (*task.mutable_env())[kTokenEnv] = job_user_tokens_(task.job_id());
  for (const auto& [name, sealed] : task.secret_env()) {
    // What the server set (TRAINYARD_USER, the checkpoint dir, ...) wins, as
    // over plain env: a spec's secret must not choose who the task runs as.
    if (task.env().count(name)) continue;
    absl::StatusOr<std::string> value = open_secret_ ? open_secret_(sealed) : absl::StatusOr<std::string>(sealed);
    if (!value.ok()) {
      // Only a data dir whose secret was replaced gets here: the task runs
      // without the variable, and the log says which.
      Log(LogLevel::kError, "server", "job %s: secret env %s of %s-%d cannot be opened: %s", task.job(), name,
          task.role(), task.index(), value.status().message());
      continue;
    }
    (*task.mutable_env())[name] = *std::move(value);
  }
  task.clear_secret_env();
  v1::ServerMessage msg;
  *msg.mutable_launch() = std::move(task);
  Send(node, std::move(msg));
}

void AgentStreams::Kill(const std::string& node, const v1::KillTask& kill) {
  v1::ServerMessage msg;
  *msg.mutable_kill() = kill;
  Send(node, std::move(msg));
}

void AgentStreams::Drained(const std::string& node) {
  v1::ServerMessage msg;
  msg.mutable_drained();
  Send(node, std::move(msg));
}

void AgentStreams::OrderCheckpoint(const std::string& job_master, uint64_t job_id, const std::string& job,
                                   const v1::CheckpointOrder& order) {
  if (!job_credentials_ || job_master.empty()) return;
  if (fence_) fence_();
  v1::ServerOrder push;
  push.set_job(job);
  *push.mutable_order() = order;
  push.set_mac(security::HmacSha256Hex(job_credentials_(job_id),
                                       OrderMacText(job, order.id(), order.deadline_unix_ms(), order.reason())));
  master_orders_.Push(job_master, std::move(push));
}

void AgentStreams::UpdateFiles(const std::string& node, const v1::TaskFiles& files) {
  v1::ServerMessage msg;
  *msg.mutable_update_files() = files;
  Send(node, std::move(msg));
}

}  // namespace trainyard::server
