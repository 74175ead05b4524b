// One reactor per agent stream. Reads are handled in order on gRPC's
// threads; writes are queued and sent one at a time.
#include "server/agent_service.h"

#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"
#include "api/node_address.h"
#include "common/logging.h"
#include "security/certs.h"
#include "server/connection_guard.h"

namespace trainyard::server {
namespace {

class AgentReactor final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>,
                           public AgentLink {
 public:
  // `cert_node`: the node the peer's verified certificate names ("" none);
  // with `node_identity` it is the only name this stream may register.
  AgentReactor(JobManager* manager, AgentStreams* streams, LogHub* logs, ExecRelay* exec, bool node_identity,
               std::string cert_node, std::string peer)
      : manager_(manager),
        streams_(streams),
        session_(streams->Open(this)),
        logs_(logs),
        exec_(exec),
        node_identity_(node_identity),
        cert_node_(std::move(cert_node)),
        peer_(std::move(peer)) {
    StartRead(&in_);
  }

  void Send(v1::ServerMessage msg) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (msg.has_registered()) msg.mutable_registered()->set_reached_address(dialed_);
    out_.push_back(std::move(msg));
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Close(grpc::Status::OK);
      return;
    }
    if (!Handle()) return;
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.pop_front();
    if (!ok) {
      writing_ = false;
      return;
    }
    if (!out_.empty() && !finished_) {
      // Orders queued before a pause go out after it: the fence is asked
      // again as each leaves (a deposed leader exits here).
      manager_->CheckOrderFence();
      StartWrite(&out_.front());
    } else {
      writing_ = false;
      if (finish_pending_) FinishLocked();
    }
  }

  void OnDone() override {
    if (!node_.empty()) Disconnected();
    streams_->Close(this);
    delete this;
  }

 private:
  // Returns false when the stream is being closed.
  bool Handle() {
    switch (in_.msg_case()) {
      case v1::AgentMessage::kRegister: {
        {
          // Before the registration is answered (and the guard forgets the
          // peer as it marks it authenticated). "" for a connection accepted
          // before the guard was installed at the server's start: the agent
          // then keeps the order it has.
          std::string dialed = ConnectionGuard::DialedAddressOf(Door::kAgents, peer_);
          std::lock_guard<std::mutex> lock(mu_);
          dialed_ = std::move(dialed);
        }
        absl::Status st = MayRegister(in_.register_().name());
        if (st.ok()) st = AddressResolves(in_.register_());
        if (st.ok()) st = manager_->RegisterAgent(in_.register_(), session_);
        if (!st.ok()) {
          Log(LogLevel::kWarning, "server", "refused agent %s from %s: %s", in_.register_().name(), peer_,
              std::string(st.message()));
          v1::ServerMessage err;
          err.set_error(std::string(st.message()));
          Send(std::move(err));
          Close(grpc::Status(GrpcCode(st), std::string(st.message())));
          return false;
        }
        node_ = in_.register_().name();
        // A registered node's connection is never shut down for a newcomer.
        ConnectionGuard::MarkAuthenticated(Door::kAgents, peer_);
        if (logs_) logs_->OnNodeConnected(node_);
        return true;
      }
      case v1::AgentMessage::kHeartbeat:
        if (node_.empty()) return Refuse();
        manager_->OnHeartbeat(node_, in_.heartbeat());
        return true;
      case v1::AgentMessage::kStatus:
        if (node_.empty()) return Refuse();
        manager_->OnTaskStatus(node_, in_.status());
        return true;
      case v1::AgentMessage::kDraining:
        if (node_.empty()) return Refuse();
        manager_->OnAgentDraining(node_, in_.draining());
        return true;
      case v1::AgentMessage::kResources:
        if (node_.empty()) return Refuse();
        manager_->OnTaskResources(node_, in_.resources());
        return true;
      case v1::AgentMessage::kLog:
        if (node_.empty()) return Refuse();
        // Pushes of the log hub's subscriptions; anything else is not ours.
        if (logs_) logs_->OnLogData(node_, in_.log());
        return true;
      case v1::AgentMessage::kExec:
        if (node_.empty()) return Refuse();
        if (exec_) exec_->OnExecOutput(node_, in_.exec());
        return true;
      default:
        return true;
    }
  }

  // Other nodes' tasks reach this node by its address (MASTER_ADDR, the
  // hosts files): one the server cannot resolve, such as a host name no DNS
  // knows, would leave a job's ranks waiting on each other. A lookup of a
  // name here is rare (once per registration) and an IP literal needs none.
  static absl::Status AddressResolves(const v1::NodeInfo& node) {
    absl::Status st = api::CheckAddressResolves(node.address());
    if (st.ok()) return st;
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", node.name(), ": ", st.message(),
        " on the server, so other nodes' tasks could not reach it; start its agent with --address set to an IP "
        "or name the other nodes resolve (without --address an agent takes the address it reaches the server "
        "from)"));
  }

  // With node identity, the name must be the one the certificate names.
  absl::Status MayRegister(const std::string& name) const {
    // A stream speaks for one node: it may register again, not as another.
    if (!node_.empty() && name != node_) {
      return absl::PermissionDeniedError(
          absl::StrCat("this stream registered node '", node_, "'; it cannot register another node"));
    }
    if (!node_identity_) return absl::OkStatus();
    if (cert_node_.empty()) {
      return absl::UnauthenticatedError(
          "an agent must present a node certificate of this cluster's CA (agent --cert/--key; made by "
          "`trainyard certs node NAME`)");
    }
    if (name != cert_node_) {
      return absl::PermissionDeniedError(absl::StrCat("this agent's certificate is node '", cert_node_,
                                                      "''s: it cannot register as node '", name, "'"));
    }
    return absl::OkStatus();
  }

  static grpc::StatusCode GrpcCode(const absl::Status& st) {
    switch (st.code()) {
      case absl::StatusCode::kAlreadyExists: return grpc::ALREADY_EXISTS;
      case absl::StatusCode::kUnauthenticated: return grpc::UNAUTHENTICATED;
      case absl::StatusCode::kPermissionDenied: return grpc::PERMISSION_DENIED;
      default: return grpc::INVALID_ARGUMENT;
    }
  }

  void Disconnected() {
    if (logs_) logs_->OnNodeDisconnected(node_);
    if (exec_) exec_->OnNodeDisconnected(node_);
    manager_->AgentDisconnected(node_, session_);
    streams_->Close(this);  // nothing more is sent to it
  }

  bool Refuse() {
    Close(grpc::Status(grpc::FAILED_PRECONDITION, "the first message on the agent stream must be register"));
    return false;
  }

  void Close(grpc::Status status) {
    if (!node_.empty()) {
      Disconnected();
      node_.clear();
    }
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
    if (writing_) {
      finish_pending_ = true;  // let the error message out first
    } else {
      FinishLocked();
    }
  }

  void FinishLocked() {
    if (finished_) return;
    finished_ = true;
    Finish(status_);
  }

  JobManager* const manager_;
  AgentStreams* const streams_;
  const uint64_t session_;  // this stream's number (AgentStreams::Open)
  LogHub* const logs_;
  ExecRelay* const exec_;
  const bool node_identity_;
  const std::string cert_node_;
  const std::string peer_;
  v1::AgentMessage in_;
  std::string node_;
  std::mutex mu_;
  // Where the agent reached this server (Registered.reached_address).
  std::string dialed_;  // guarded by mu_
  std::deque<v1::ServerMessage> out_;
  bool writing_ = false;
  bool finished_ = false;
  bool finish_pending_ = false;
  grpc::Status status_;
};

}  // namespace

namespace {
// The node the peer's certificate names, as TLS verified it; "" without one.
std::string CertNode(const grpc::CallbackServerContext* context) {
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  for (const grpc::string_ref& pem : auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME)) {
    return security::NodeNameOfPeerCert(std::string(pem.data(), pem.size()));
  }
  return "";
}
}  // namespace

grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>* AgentService::Connect(
    grpc::CallbackServerContext* context) {
  return new AgentReactor(manager_, streams_, logs_, exec_, node_identity_, node_identity_ ? CertNode(context) : "", context->peer());
}

}  // namespace trainyard::server
