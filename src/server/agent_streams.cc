// The gRPC-stream execution backend (see agent_streams.h).
#include "server/agent_streams.h"

#include "common/order_mac.h"
#include "security/crypto.h"

namespace trainyard::server {

void AgentStreams::SetOrderKeys(JobCredentials of) {
  absl::MutexLock lock(&mu_);
  job_credentials_ = std::move(of);
}

uint64_t AgentStreams::Open(AgentLink* link) {
  absl::MutexLock lock(&mu_);
  auto [it, added] = streams_.try_emplace(link);
  if (added) {
    it->second.session = next_session_++;
    by_session_.emplace(it->second.session, link);
  }
  return it->second.session;
}

void AgentStreams::Close(AgentLink* link) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(link);
  if (it == streams_.end()) return;
  // Its node may speak through a newer stream already.
  if (auto bound = links_.find(it->second.node); bound != links_.end() && bound->second == link) links_.erase(bound);
  by_session_.erase(it->second.session);
  streams_.erase(it);
}

size_t AgentStreams::Connected() const {
  absl::MutexLock lock(&mu_);
  return links_.size();
}

bool AgentStreams::Send(const std::string& node, v1::ServerMessage msg) {
  if (fence_) fence_();  // before the lock: a deposed leader does not return
  absl::MutexLock lock(&mu_);
  auto it = links_.find(node);
  if (it == links_.end()) return false;
  it->second->Send(std::move(msg));
  return true;
}

void AgentStreams::Registered(const std::string& node, uint64_t session, const v1::Registered& ack) {
  if (fence_) fence_();
  v1::ServerMessage msg;
  *msg.mutable_registered() = ack;
  absl::MutexLock lock(&mu_);
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return;  // closed meanwhile: its agent is gone
  AgentLink* link = it->second;
  Stream& stream = streams_[link];
  // A stream speaks for one node (the agent service refuses another name):
  // one that did would no longer be bound to the first.
  if (!stream.node.empty() && stream.node != node) {
    if (auto before = links_.find(stream.node); before != links_.end() && before->second == link) links_.erase(before);
  }
  links_[node] = link;
  stream.node = node;
  link->Send(std::move(msg));
}

void AgentStreams::Launch(const std::string& node, v1::TaskSpec task) {
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
  JobCredentials credentials;
  {
    absl::MutexLock lock(&mu_);
    credentials = job_credentials_;
  }
  if (!credentials || job_master.empty()) return;
  if (fence_) fence_();
  v1::ServerOrder push;
  push.set_job(job);
  *push.mutable_order() = order;
  push.set_mac(security::HmacSha256Hex(credentials(job_id),
                                       OrderMacText(job, order.id(), order.deadline_unix_ms(), order.reason())));
  master_orders_.Push(job_master, std::move(push));
}

void AgentStreams::UpdateFiles(const std::string& node, const v1::TaskFiles& files) {
  v1::ServerMessage msg;
  *msg.mutable_update_files() = files;
  Send(node, std::move(msg));
}

namespace {
// A ServerMessage that `fill` fills in.
template <typename Fill>
v1::ServerMessage MessageOf(Fill fill) {
  v1::ServerMessage msg;
  fill(msg);
  return msg;
}
}  // namespace

bool AgentStreams::ReadLog(const std::string& node, v1::LogRead read) {
  return Send(node, MessageOf([&](v1::ServerMessage& m) { *m.mutable_read_log() = std::move(read); }));
}
bool AgentStreams::AckLog(const std::string& node, v1::LogAck ack) {
  return Send(node, MessageOf([&](v1::ServerMessage& m) { *m.mutable_ack_log() = std::move(ack); }));
}
bool AgentStreams::CancelLog(const std::string& node, v1::LogCancel cancel) {
  return Send(node, MessageOf([&](v1::ServerMessage& m) { *m.mutable_cancel_log() = std::move(cancel); }));
}
bool AgentStreams::OpenExec(const std::string& node, v1::ExecOpen open) {
  return Send(node, MessageOf([&](v1::ServerMessage& m) { *m.mutable_exec_open() = std::move(open); }));
}
bool AgentStreams::ExecInput(const std::string& node, v1::ExecInput input) {
  return Send(node, MessageOf([&](v1::ServerMessage& m) { *m.mutable_exec_input() = std::move(input); }));
}

}  // namespace trainyard::server
