// The gRPC-stream execution backend (see agent_streams.h).
#include "server/agent_streams.h"

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
