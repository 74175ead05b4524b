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
    if (token.ok() && on_change_) {
      if (absl::Status kept = on_change_(); !kept.ok()) token = kept;
    }
  }
  if (!token.ok()) return Grpc(token.status());
  resp->set_token(*token);
  resp->set_expires_unix_ms(absl::ToUnixMillis(now + ttl));
  Log(LogLevel::kInfo, "server", "join token for node %s made by %s, valid %s", req->node(),
      who->user.empty() ? "an admin" : who->user, absl::FormatDuration(ttl));
  return grpc::Status::OK;
}

namespace {

// Longer than any real token ("tyj_" + 64 hex) or request (an EC key's CSR
// is under 1 KiB): refused before anything is read or parsed.
constexpr size_t kMaxTokenBytes = 128;
constexpr size_t kMaxCsrBytes = 16 * 1024;

// The checks that need nothing of the server's: the fields' sizes and the
// node name a certificate can carry.
absl::Status CheckJoinRequest(const v1::JoinNodeRequest& req) {
  if (req.token().size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token: longer than ", kMaxTokenBytes, " bytes"));
  }
  if (req.csr_pem().size() > kMaxCsrBytes) {
    return absl::InvalidArgumentError(absl::StrCat("csr_pem: longer than ", kMaxCsrBytes, " bytes"));
  }
  return security::CheckNodeNameForCert(req.node());
}

}  // namespace

grpc::Status JoinService::JoinNode(grpc::ServerContext* ctx, const v1::JoinNodeRequest* req,
                                   v1::JoinNodeResponse* resp) {
  return Grpc(Join(*req, ctx->peer(), absl::Now(), resp));
}

absl::Status JoinService::Join(const v1::JoinNodeRequest& req, const std::string& peer, absl::Time now,
                               v1::JoinNodeResponse* resp) {
  if (absl::Status admitted = guard_.Admit(peer, now); !admitted.ok()) return admitted;
  absl::Status request = CheckJoinRequest(req);
  if (!request.ok()) {
    std::string line = guard_.Refused(peer, JoinGuard::Refusal::kRequest, request.message(), now);
    if (!line.empty()) Log(LogLevel::kWarning, "server", "%s", line);
    return request;
  }
  return SignWithToken(req, peer, now, resp);
}

absl::Status JoinService::SignWithToken(const v1::JoinNodeRequest& req, const std::string& peer, absl::Time now,
                                        v1::JoinNodeResponse* resp) {
  absl::MutexLock lock(&mu_);
  const std::string tokens = security::JoinTokenFilePath(data_dir_);
  // The token first: a stranger's call reads the token file and nothing
  // else. It is redeemed only once the certificate is made, so a request
  // that cannot be signed does not use it up.
  absl::Status token = security::CheckJoinToken(tokens, req.token(), req.node(), now);
  if (absl::IsPermissionDenied(token)) {
    std::string line = guard_.Refused(peer, JoinGuard::Refusal::kToken,
                                      absl::StrCat("as node \"", absl::CHexEscape(req.node().substr(0, 64)), "\": ",
                                                   token.message()),
                                      now);
    if (!line.empty()) Log(LogLevel::kWarning, "server", "%s", line);
    return token;
  }
  if (!token.ok()) return token;  // the server's own trouble (its token file)
  absl::StatusOr<security::KeyPair> ca = security::LoadCa(tls_dir_);
  if (!ca.ok()) {
    Log(LogLevel::kError, "server", "join of node %s: the CA cannot be read: %s", req.node(), ca.status().message());
    return absl::FailedPreconditionError("the server cannot sign node certificates now (its CA cannot be read)");
  }
  absl::StatusOr<std::string> cert = security::SignNodeRequest(*ca, req.csr_pem(), req.node());
  if (!cert.ok()) {
    std::string line = guard_.Refused(peer, JoinGuard::Refusal::kRequest, cert.status().message(), now);
    if (!line.empty()) Log(LogLevel::kWarning, "server", "%s", line);
    return cert.status();
  }
  if (absl::Status st = security::RedeemJoinToken(tokens, req.token(), req.node(), now); !st.ok()) return st;
  // Used up for every server before the certificate goes out. When the
  // store does not take it, the token stays used here and unused there:
  // a failed write on etcd means this server no longer leads (it exits),
  // and the next leader's copy lets the node join once more.
  if (on_change_) {
    if (absl::Status kept = on_change_(); !kept.ok()) return kept;
  }
  guard_.Joined();
  resp->set_cert_pem(*cert);
  resp->set_ca_pem(ca->cert_pem);
  Log(LogLevel::kInfo, "server", "node %s joined from %s with a join token: its certificate is made", req.node(), peer);
  return absl::OkStatus();
}

}  // namespace trainyard::server
