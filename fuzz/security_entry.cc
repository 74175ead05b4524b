// The fuzz targets of credentials a stranger presents:
//  - bearer_token: an Authorization header's value, checked as every gRPC
//    call and /api/ request is (ServerSecurity::Authenticate: bearer tokens
//    of the token file, login tokens under the server's secret), and by a
//    stream's CredentialCheck; and as a service link's grant
//    (ServerSecurity::OpenServiceGrant, every /proxy/ request).
//  - join_request: a JoinNode request (lines: the join token, the node
//    name, then the certificate request's PEM), through what the server
//    does with one: SignNodeRequest under the cluster CA and
//    RedeemJoinToken against a token file.
// The server's data dir and CA are made once per process, in the scratch
// dir, with a fixed secret so that the seeds can hold valid login tokens.
#include <sys/stat.h>

#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "fuzz/entry_points.h"
#include "fuzz/fuzz_files.h"
#include "security/certs.h"
#include "security/credential_check.h"
#include "security/crypto.h"
#include "security/join_tokens.h"
#include "security/login.h"
#include "security/server_security.h"
#include "security/tokens.h"

namespace trainyard::fuzz {
namespace {

// The server's secret in the seeds' data dir (login tokens are HMACs under it).
constexpr char kSecret[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
// The join token the token file holds for node-1, unused and valid; the
// used and expired ones beside it.
const std::string kJoinToken = "tyj_" + std::string(64, 'a');
const std::string kUsedJoinToken = "tyj_" + std::string(64, 'b');
const std::string kExpiredJoinToken = "tyj_" + std::string(64, 'c');
const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

security::ServerSecurity& TheSecurity() {
  static security::ServerSecurity* s = [] {
    std::string dir = ScratchDir() + "/server";
    TY_CHECK(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, "mkdir %s", dir.c_str());
    WriteScratchFile(dir + "/job-secret", absl::StrCat(kSecret, "\n"));
    std::string tokens = security::TokenFilePath(dir);
    TY_CHECK(security::AddToken(tokens, "ty_fuzz_alice", "alice", false).ok(), "token file");
    TY_CHECK(security::AddToken(tokens, "ty_fuzz_admin", "root", true).ok(), "token file");
    absl::StatusOr<std::unique_ptr<security::ServerSecurity>> opened =
        security::ServerSecurity::Open({.data_dir = dir, .enabled = true, .acls = {}, .default_queue = "default"});
    TY_CHECK(opened.ok(), "security: %s", std::string(opened.status().message()).c_str());
    return opened->release();
  }();
  return *s;
}

// The token of an "authorization" value, as the server takes it.
std::string TokenOf(absl::string_view authorization) {
  absl::string_view v = absl::StripAsciiWhitespace(authorization);
  if (!absl::StartsWithIgnoreCase(v, "bearer ")) return "";
  return std::string(absl::StripAsciiWhitespace(v.substr(7)));
}

const security::KeyPair& TheCa() {
  static const security::KeyPair ca = [] {
    absl::StatusOr<security::KeyPair> made = security::MakeCa("trainyard fuzz CA");
    TY_CHECK(made.ok(), "CA: %s", std::string(made.status().message()).c_str());
    return *made;
  }();
  return ca;
}

}  // namespace

void BearerToken(std::string_view bytes) {
  absl::string_view data(bytes.data(), bytes.size());
  security::ServerSecurity& s = TheSecurity();
  absl::StatusOr<security::Principal> who = s.Authenticate(data);
  if (who.ok()) {
    // Only a credential the server made speaks for anyone.
    std::string token = TokenOf(data);
    bool issued = (token == "ty_fuzz_alice" && who->user == "alice" && !who->admin) ||
                  (token == "ty_fuzz_admin" && who->user == "root" && who->admin);
    bool login = !issued && security::ValidateUserName(who->user).ok() &&
                 token == security::LoginToken(kSecret, who->user, who->admin);
    TY_CHECK(issued || login, "'%.80s' authenticated as %s%s", token.c_str(), who->user.c_str(),
             who->admin ? " (admin)" : "");
    TY_CHECK(!who->anonymous, "a token made an anonymous principal");
  }
  // A stream opened with it holds exactly as long as the value authenticates.
  security::CredentialCheck check([&s](absl::string_view a) { return s.Authenticate(a); }, std::string(data), kNow,
                                  absl::ZeroDuration());
  TY_CHECK(check.Valid(kNow + absl::Seconds(1)) == who.ok(), "the stream's check and the call disagree");
  // The same bytes as a service link's grant (/proxy/GRANT/): only one
  // this server made opens, and it says what was made.
  absl::StatusOr<security::ServiceGrant> grant = s.OpenServiceGrant(data, absl::ToUnixSeconds(kNow));
  if (grant.ok()) {
    TY_CHECK(s.ServiceGrantText(*grant) == data, "grant '%.80s' opened but was not made so", std::string(data).c_str());
  }
}

void JoinRequest(std::string_view data) {
  // token \n node \n csr_pem
  size_t a = data.find('\n');
  size_t b = a == std::string_view::npos ? a : data.find('\n', a + 1);
  if (b == std::string_view::npos) return;
  std::string token(data.substr(0, a)), node(data.substr(a + 1, b - a - 1)), csr(data.substr(b + 1));
  absl::StatusOr<std::string> cert = security::SignNodeRequest(TheCa(), csr, node);
  if (cert.ok()) {
    // The certificate names the node asked for, as a client, and no other.
    TY_CHECK(security::CheckNodeNameForCert(node).ok(), "signed for node name '%.80s'", node.c_str());
    TY_CHECK(security::NodeNameOfPeerCert(*cert) == node, "the certificate does not name node '%s'", node.c_str());
  }
  // A fresh token file each time: one token per state a stranger may meet.
  static const std::string path = security::JoinTokenFilePath(ScratchDir());
  int64_t later = absl::ToUnixMillis(kNow + absl::Hours(1)), earlier = absl::ToUnixMillis(kNow - absl::Minutes(1));
  WriteScratchFile(path, absl::StrCat(security::Sha256Hex(kJoinToken), " node-1 ", later, " 0\n",
                                      security::Sha256Hex(kUsedJoinToken), " node-1 ", later, " 1\n",
                                      security::Sha256Hex(kExpiredJoinToken), " node-1 ", earlier, " 0\n"));
  absl::Status redeemed = security::RedeemJoinToken(path, token, node, kNow);
  TY_CHECK(!redeemed.ok() || (token == kJoinToken && node == "node-1"), "join token '%.80s' for node '%.80s' taken",
           token.c_str(), node.c_str());
  if (redeemed.ok()) {
    TY_CHECK(!security::RedeemJoinToken(path, token, node, kNow).ok(), "a join token joined twice");
  }
}

}  // namespace trainyard::fuzz
