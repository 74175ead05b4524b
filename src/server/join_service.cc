// NodeJoin (see join_service.h).
#include "server/join_service.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "security/certs.h"
#include "security/files.h"
#include "security/join_tokens.h"

namespace trainyard::server {
namespace {
grpc::Status Grpc(const absl::Status& st) {
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}
}  // namespace

grpc::Status JoinService::GetClusterCa(grpc::ServerContext*, const v1::GetClusterCaRequest*,
                                       v1::GetClusterCaResponse* resp) {
  absl::StatusOr<std::string> ca = security::ReadWholeFile(security::CaCertPath(tls_dir_));
  if (!ca.ok()) return Grpc(ca.status());
  resp->set_ca_pem(*ca);
  return grpc::Status::OK;
}

grpc::Status JoinService::CreateJoinToken(grpc::ServerContext* ctx, const v1::CreateJoinTokenRequest* req,
                                          v1::CreateJoinTokenResponse* resp) {
  auto it = ctx->client_metadata().find("authorization");
  std::string authorization = it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  absl::StatusOr<security::Principal> who = security_->Authenticate(authorization);
  if (!who.ok()) return Grpc(who.status());
  if (!who->admin) return grpc::Status(grpc::PERMISSION_DENIED, "only a cluster admin makes join tokens");
  absl::Time now = absl::Now();
  absl::Duration ttl = absl::Milliseconds(req->ttl_ms());
  absl::StatusOr<std::string> token;
  {
    absl::MutexLock lock(&mu_);
    token = security::IssueJoinToken(security::JoinTokenFilePath(data_dir_), req->node(), ttl, now);
  }
  if (!token.ok()) return Grpc(token.status());
  resp->set_token(*token);
  resp->set_expires_unix_ms(absl::ToUnixMillis(now + ttl));
  Log(LogLevel::kInfo, "server", "join token for node %s made by %s, valid %s", req->node(),
      who->user.empty() ? "an admin" : who->user, absl::FormatDuration(ttl));
  return grpc::Status::OK;
}

grpc::Status JoinService::JoinNode(grpc::ServerContext* ctx, const v1::JoinNodeRequest* req,
                                   v1::JoinNodeResponse* resp) {
  absl::MutexLock lock(&mu_);
  // The name and the request are checked (by signing) before the token is
  // used up, so a malformed request does not waste it; a certificate made
  // for a token that is then refused is dropped unsent.
  absl::StatusOr<security::KeyPair> ca = security::LoadCa(tls_dir_);
  if (!ca.ok()) return Grpc(ca.status());
  absl::StatusOr<std::string> cert = security::SignNodeRequest(*ca, req->csr_pem(), req->node());
  absl::Status ok = cert.ok() ? security::RedeemJoinToken(security::JoinTokenFilePath(data_dir_), req->token(),
                                                          req->node(), absl::Now())
                              : cert.status();
  if (!ok.ok()) {
    // The name as sent may be anything: quoted, escaped and cut.
    Log(LogLevel::kWarning, "server", "refused a join as node \"%s\" from %s: %s",
        absl::CHexEscape(req->node().substr(0, 64)), ctx->peer(), std::string(ok.message()));
    return Grpc(ok);
  }
  resp->set_cert_pem(*cert);
  resp->set_ca_pem(ca->cert_pem);
  Log(LogLevel::kInfo, "server", "node %s joined from %s with a join token: its certificate is made", req->node(),
      ctx->peer());
  return grpc::Status::OK;
}

}  // namespace trainyard::server
