// NodeJoin: how a node gets its certificate with a join token
// (docs/security.md, "Join tokens"): the CA (public) for the agent to check
// against its pin; join tokens made by an admin; a node certificate for a
// valid, unused, unexpired token of that node. Served only with TLS (the
// server holds the CA's key in its --tls-dir). Rare calls: a synchronous
// service, one lock. JoinNode is anonymous: the token is checked before the
// CA's key is read, and refusals are rate-limited per peer, counted and
// logged in summary (join_guard.h).
#pragma once

#include <functional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/join.grpc.pb.h"
#include "security/server_security.h"
#include "server/join_guard.h"

namespace trainyard::server {

class JoinService final : public v1::NodeJoin::Service {
 public:
  // `tls_dir`: the certificate directory (its CA signs); join tokens are
  // kept in `data_dir`.
  JoinService(std::string tls_dir, std::string data_dir, security::ServerSecurity* security,
              JoinGuardOptions guard = {})
      : tls_dir_(std::move(tls_dir)), data_dir_(std::move(data_dir)), security_(security), guard_(guard) {}

  // Called after a join token was made or used up, before either is
  // answered (its error is the call's), under this service's lock: a
  // server of several keeps the token file in the store that they share
  // (server/shared_files.h). REQUIRES: set once, before the service
  // serves; the hook does not call this service.
  void SetOnChange(std::function<absl::Status()> on_change) { on_change_ = std::move(on_change); }

  grpc::Status GetClusterCa(grpc::ServerContext* ctx, const v1::GetClusterCaRequest* req,
                            v1::GetClusterCaResponse* resp) override;
  grpc::Status CreateJoinToken(grpc::ServerContext* ctx, const v1::CreateJoinTokenRequest* req,
                               v1::CreateJoinTokenResponse* resp) override;
  grpc::Status JoinNode(grpc::ServerContext* ctx, const v1::JoinNodeRequest* req, v1::JoinNodeResponse* resp) override;

  // JoinNode's work for a call from `peer` at `now` (public for tests):
  // ResourceExhausted for a peer over its rate of refusals; InvalidArgument
  // for a request that cannot be signed; PermissionDenied for a token that
  // may not join this node now (nothing else is read: not the CA's key);
  // else the node's certificate, and the token is used up.
  absl::Status Join(const v1::JoinNodeRequest& req, const std::string& peer, absl::Time now,
                    v1::JoinNodeResponse* resp);

 private:
  // The token checked, the certificate made and the token redeemed, under
  // mu_ so that no other join takes the token between the check and the redeem.
  absl::Status SignWithToken(const v1::JoinNodeRequest& req, const std::string& peer, absl::Time now,
                             v1::JoinNodeResponse* resp);

  const std::string tls_dir_;
  const std::string data_dir_;
  security::ServerSecurity* const security_;
  std::function<absl::Status()> on_change_;
  absl::Mutex mu_;  // one change of the join-token file at a time
  JoinGuard guard_;
};

}  // namespace trainyard::server
