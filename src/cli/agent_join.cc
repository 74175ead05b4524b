// An agent's join with a join token (see agent_join.h).
#include "cli/agent_join.h"

#include <sys/stat.h>

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "common/server_list_channel.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "proto/join.grpc.pb.h"
#include "security/certs.h"
#include "security/files.h"

namespace trainyard::cli {
namespace {

absl::Status FromGrpc(const grpc::Status& st, const std::string& what) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), absl::StrCat(what, ": ", st.error_message()));
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  ctx->set_wait_for_ready(true);  // a server that is starting
}

// A channel to `server`, or to whichever server of a list answers (the
// leader), as the CLI's channels are made.
std::shared_ptr<grpc::Channel> JoinChannel(const std::string& server,
                                           const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  std::string target = ServerListChannelTarget(server, &args);
  return grpc::CreateCustomChannel(target, creds, args);
}

// The cluster CA as the server says it: over TLS whose certificate is not
// verified yet (the pin decides whether the answer is taken).
absl::StatusOr<std::string> FetchCa(const std::string& server) {
  grpc::experimental::TlsChannelCredentialsOptions o;
  o.set_verify_server_certs(false);
  o.set_check_call_host(false);
  o.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  auto stub = v1::NodeJoin::NewStub(JoinChannel(server, grpc::experimental::TlsCredentials(o)));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::GetClusterCaResponse resp;
  grpc::Status st = stub->GetClusterCa(&ctx, v1::GetClusterCaRequest(), &resp);
  if (!st.ok()) return FromGrpc(st, absl::StrCat("asking ", server, " for its CA"));
  return resp.ca_pem();
}

absl::Status WritePublic(const std::string& path, const std::string& pem) {
  if (absl::Status s = security::WritePrivateFile(path, pem); !s.ok()) return s;
  chmod(path.c_str(), 0644);
  return absl::OkStatus();
}

}  // namespace

// True when `pem` holds exactly one PEM block (a certificate) and nothing
// but blank space around it: the pin covers only the first certificate, so
// a second one after it would be trusted unpinned.
bool IsOneCertificate(const std::string& pem) {
  const std::string kEnd = "-----END CERTIFICATE-----";
  size_t begin = pem.find("-----BEGIN ");
  size_t end = pem.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos) return false;
  if (pem.find("-----BEGIN ", begin + 1) != std::string::npos) return false;
  for (size_t i = 0; i < begin; ++i) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(pem[i]))) return false;
  }
  for (size_t i = end + kEnd.size(); i < pem.size(); ++i) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(pem[i]))) return false;
  }
  return true;
}

absl::Status JoinCluster(const JoinOptions& o) {
  // A list that cannot be one target says why (ServerListChannelTarget
  // would pass it on to gRPC as a name that does not resolve).
  if (absl::StatusOr<std::string> list = ServerListTarget(o.server); !list.ok()) return list.status();
  absl::StatusOr<std::string> ca = FetchCa(o.server);
  if (!ca.ok()) return ca.status();
  if (!IsOneCertificate(*ca)) {
    return absl::PermissionDeniedError(absl::StrCat("the server at ", o.server,
                                                    " answered with more than one CA certificate: not joining (the "
                                                    "token is not sent to it)"));
  }
  std::string pin = security::CertPin(*ca);
  if (pin.empty() || pin != o.ca_pin) {
    return absl::PermissionDeniedError(absl::StrCat("the server at ", o.server, " has CA ", pin.empty() ? "?" : pin,
                                                    ", not --ca-pin ", o.ca_pin,
                                                    ": not joining (the token is not sent to it)"));
  }
  absl::StatusOr<security::KeyAndRequest> kr = security::MakeKeyAndRequest(o.node);
  if (!kr.ok()) return kr.status();
  // From here on the server is verified with the pinned CA.
  auto stub = v1::NodeJoin::NewStub(JoinChannel(o.server, grpc::SslCredentials({.pem_root_certs = *ca})));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::JoinNodeRequest req;
  req.set_token(o.token);
  req.set_node(o.node);
  req.set_csr_pem(kr->csr_pem);
  v1::JoinNodeResponse resp;
  grpc::Status st = stub->JoinNode(&ctx, req, &resp);
  if (!st.ok()) return FromGrpc(st, "the server refused the join");
  if (security::CertCommonName(resp.cert_pem()) != o.node) {
    return absl::InternalError("the server's answer is not a certificate of this node");
  }
  if (absl::Status s = security::WritePrivateFile(o.key_file, kr->key_pem); !s.ok()) return s;
  if (absl::Status s = WritePublic(o.cert_file, resp.cert_pem()); !s.ok()) return s;
  return WritePublic(o.ca_file, *ca);
}

}  // namespace trainyard::cli
