// NodeJoin: how a node gets its certificate with a join token
// (docs/security.md, "Join tokens"): the CA (public) for the agent to check
// against its pin; join tokens made by an admin; a node certificate for a
// valid, unused, unexpired token of that node. Served only with TLS (the
// server holds the CA's key in its --tls-dir). Rare calls: a synchronous
// service, one lock.
#pragma once

#include <string>

#include "absl/synchronization/mutex.h"
#include "proto/join.grpc.pb.h"
#include "security/server_security.h"

namespace trainyard::server {

class JoinService final : public v1::NodeJoin::Service {
 public:
  // `tls_dir`: the certificate directory (its CA signs); join tokens are
  // kept in `data_dir`.
  JoinService(std::string tls_dir, std::string data_dir, security::ServerSecurity* security)
      : tls_dir_(std::move(tls_dir)), data_dir_(std::move(data_dir)), security_(security) {}

  grpc::Status GetClusterCa(grpc::ServerContext* ctx, const v1::GetClusterCaRequest* req,
                            v1::GetClusterCaResponse* resp) override;
  grpc::Status CreateJoinToken(grpc::ServerContext* ctx, const v1::CreateJoinTokenRequest* req,
                               v1::CreateJoinTokenResponse* resp) override;
  grpc::Status JoinNode(grpc::ServerContext* ctx, const v1::JoinNodeRequest* req, v1::JoinNodeResponse* resp) override;

 private:
  const std::string tls_dir_;
  const std::string data_dir_;
  security::ServerSecurity* const security_;
  absl::Mutex mu_;  // one change of the join-token file at a time
};

}  // namespace trainyard::server
