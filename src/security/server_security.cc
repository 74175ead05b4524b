// A server's security state (see server_security.h).
#include "security/server_security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "security/client_config.h"
#include "security/crypto.h"
#include "security/files.h"
#include "security/login.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"

namespace trainyard::security {

namespace {
std::string CredentialText(uint64_t job_id) { return absl::StrCat("trainyard job ", job_id); }
std::string WorkerSecretText(uint64_t job_id) { return absl::StrCat("trainyard job workers ", job_id); }
std::string UserTokenText(uint64_t job_id) { return absl::StrCat("trainyard job user ", job_id); }
// Not "tyj_": join tokens (join_tokens.h) have that one.
constexpr absl::string_view kJobUserTokenPrefix = "tyu_";
}  // namespace

std::string JobCredential(absl::string_view secret, uint64_t job_id) {
  return HmacSha256Hex(secret, CredentialText(job_id));
}

std::string JobWorkerSecret(absl::string_view secret, uint64_t job_id) {
  return HmacSha256Hex(secret, WorkerSecretText(job_id));
}

std::string ServerSecurity::JobCredentialOf(uint64_t job_id) const { return job_mac_.Hex(CredentialText(job_id)); }

std::string ServerSecurity::JobWorkerSecretOf(uint64_t job_id) const {
  return job_mac_.Hex(WorkerSecretText(job_id));
}

std::string ServerSecurity::JobUserTokenOf(uint64_t job_id) const {
  return absl::StrCat(kJobUserTokenPrefix, job_id, "_", job_mac_.Hex(UserTokenText(job_id)));
}

absl::StatusOr<Principal> ServerSecurity::AuthenticateJobUserToken(absl::string_view token) const {
  absl::string_view rest = token.substr(kJobUserTokenPrefix.size());
  size_t sep = rest.find('_');
  uint64_t job_id = 0;
  absl::string_view id = sep == absl::string_view::npos ? absl::string_view() : rest.substr(0, sep);
  // Digits only, no leading zero: one spelling per credential.
  bool digits = !id.empty() && id.size() <= 20 && (id[0] != '0' || id.size() == 1) &&
                absl::c_all_of(id, [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(id, &job_id) ||
      !ConstantTimeEquals(job_mac_.Hex(UserTokenText(job_id)), rest.substr(sep + 1))) {
    return absl::UnauthenticatedError("the job credential is not valid");
  }
  std::optional<std::string> user = live_job_user_ ? live_job_user_(job_id) : std::nullopt;
  if (!user) {
    return absl::UnauthenticatedError(
        absl::StrCat("the credential of job ", job_id, " ended with the job: a job's user credential is valid only "
                     "while the job has not ended"));
  }
  return Principal{.user = *std::move(user), .admin = false, .anonymous = false};
}

ServerSecurity::ServerSecurity(Options options, std::string job_secret)
    : enabled_(options.enabled),
      data_dir_(options.data_dir),
      tokens_(TokenFilePath(options.data_dir)),
      access_(std::move(options.acls), std::move(options.default_queue)),
      job_secret_(std::move(job_secret)),
      job_mac_(job_secret_),
      service_mac_(HmacSha256Hex(job_secret_, "trainyard service grants")) {}

namespace {
// A grant's MAC: 128 bits of the HMAC, as 32 hex digits.
constexpr size_t kGrantMacHex = 32;
}  // namespace

std::string ServerSecurity::ServiceGrantText(const ServiceGrant& g) const {
  std::string body = absl::StrCat(g.job_id, ".", g.index, ".", g.expires_unix_s, ".", g.admin ? 1 : 0, ".",
                                  absl::WebSafeBase64Escape(g.job), ".", absl::WebSafeBase64Escape(g.role), ".",
                                  absl::WebSafeBase64Escape(g.user));
  std::string mac = service_mac_.Hex(body).substr(0, kGrantMacHex);
  return absl::StrCat(body, ".", mac);
}

absl::StatusOr<ServiceGrant> ServerSecurity::OpenServiceGrant(absl::string_view text, int64_t now_unix_s) const {
  auto bad = [](absl::string_view why) {
    return absl::PermissionDeniedError(absl::StrCat("the service link is not valid: ", why));
  };
  if (text.size() > 1024) return bad("too long");
  size_t dot = text.rfind('.');
  if (dot == absl::string_view::npos) return bad("malformed");
  absl::string_view body = text.substr(0, dot);
  if (!ConstantTimeEquals(service_mac_.Hex(body).substr(0, kGrantMacHex), text.substr(dot + 1))) {
    return bad("not made by this server, or changed");
  }
  std::vector<absl::string_view> f = absl::StrSplit(body, '.');
  ServiceGrant g;
  int admin = 0;
  if (f.size() != 7 || !absl::SimpleAtoi(f[0], &g.job_id) || !absl::SimpleAtoi(f[1], &g.index) ||
      !absl::SimpleAtoi(f[2], &g.expires_unix_s) || !absl::SimpleAtoi(f[3], &admin) ||
      !absl::WebSafeBase64Unescape(f[4], &g.job) || !absl::WebSafeBase64Unescape(f[5], &g.role) ||
      !absl::WebSafeBase64Unescape(f[6], &g.user)) {
    return bad("malformed");
  }
  g.admin = admin == 1;
  if (now_unix_s >= g.expires_unix_s) {
    return bad("it expired; ask for a new one (`trainyard url`, or the job's page)");
  }
  return g;
}

absl::StatusOr<std::unique_ptr<ServerSecurity>> ServerSecurity::Open(Options options) {
  absl::StatusOr<std::string> secret = LoadOrCreateSecret(options.data_dir + "/job-secret");
  if (!secret.ok()) return secret.status();
  return std::unique_ptr<ServerSecurity>(new ServerSecurity(std::move(options), std::move(*secret)));
}

absl::StatusOr<Principal> ServerSecurity::Authenticate(absl::string_view authorization) {
  if (!enabled_) return Principal{.user = "", .admin = true, .anonymous = true};
  absl::string_view bearer = absl::StripAsciiWhitespace(authorization);
  if (absl::StartsWithIgnoreCase(bearer, "bearer ")) {
    absl::string_view token = absl::StripAsciiWhitespace(bearer.substr(7));
    if (absl::StartsWith(token, kJobUserTokenPrefix)) return AuthenticateJobUserToken(token);
    if (IsLoginToken(token)) {
      absl::StatusOr<Principal> p = AuthenticateLoginToken(job_secret_, token);
      // A name the token file took after the login is the token's from then on.
      if (p.ok() && tokens_.HasUser(p->user)) {
        return absl::UnauthenticatedError(absl::StrCat("the login token of '", p->user,
                                                       "' is no longer valid: the cluster issued tokens for that name"));
      }
      return p;
    }
  }
  return tokens_.Authenticate(authorization);
}

absl::StatusOr<std::string> ServerSecurity::LoginTokenOf(const std::string& user, bool admin) {
  if (tokens_.HasUser(user)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the cluster has issued tokens for the user '", user, "': log in with one of them, not as the account"));
  }
  return LoginToken(job_secret_, user, admin);
}

absl::StatusOr<std::string> ServerSecurity::SealValue(const std::string& plain) const {
  return Seal(job_secret_, plain);
}

absl::StatusOr<std::string> ServerSecurity::OpenValue(const std::string& sealed) const {
  return security::Open(job_secret_, sealed);
}

bool ServerSecurity::IsJobCredential(uint64_t job_id, absl::string_view presented) const {
  return !presented.empty() && ConstantTimeEquals(JobCredentialOf(job_id), presented);
}

absl::StatusOr<std::string> ServerSecurity::BootstrapAdmin(const std::string& address, const std::string& ca_file) {
  struct stat st {};
  if (!enabled_ || stat(tokens_.path().c_str(), &st) == 0) return std::string();
  absl::StatusOr<std::string> token = tokens_.Issue("admin", /*admin=*/true);
  if (!token.ok()) {
    // The file this made is taken back, so the next start bootstraps again
    // rather than find a token nobody holds.
    unlink(tokens_.path().c_str());
    return token.status();
  }
  std::string path = data_dir_ + "/admin-client.yaml";
  if (absl::Status s = WriteClientConfig(path, {.server = address, .token = *token, .ca_file = ca_file}); !s.ok()) return s;
  return path;
}

}  // namespace trainyard::security
