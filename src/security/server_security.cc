// A server's security state (see server_security.h).
#include "security/server_security.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "security/client_config.h"
#include "security/crypto.h"
#include "security/files.h"
#include "security/login.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"

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
      job_mac_(job_secret_) {}

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
  if (!token.ok()) return token.status();
  std::string path = data_dir_ + "/admin-client.yaml";
  if (absl::Status s = WriteClientConfig(path, {.server = address, .token = *token, .ca_file = ca_file}); !s.ok()) return s;
  return path;
}

}  // namespace trainyard::security
