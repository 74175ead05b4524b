// What a server checks its clients against: its tokens, the rules of access
// and the secret behind its jobs' credentials, made from its data dir
// (docs/security.md). The gRPC services and the HTTP API hold one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "security/access.h"
#include "security/crypto.h"
#include "security/tokens.h"

namespace trainyard::security {

// The gRPC metadata key (lowercase) that carries a job's credential.
inline constexpr char kJobTokenMetadata[] = "trainyard-job-token";

// The credential of job `job_id` under `secret`: HMAC-SHA256 of the id.
std::string JobCredential(absl::string_view secret, uint64_t job_id);
// The secret job `job_id`'s workers show its job master (another HMAC of
// the id, so a worker cannot pass for the master at the server).
std::string JobWorkerSecret(absl::string_view secret, uint64_t job_id);

// What a service link grants (docs/services.md): `user` (an admin when
// `admin`) may reach the service port of task ROLE/INDEX of job `job`
// (the one with id `job_id`) through the server's proxy until
// `expires_unix_s`.
struct ServiceGrant {
  std::string job;
  uint64_t job_id = 0;
  std::string role;
  int32_t index = 0;
  std::string user;
  bool admin = false;
  int64_t expires_unix_s = 0;
};

class ServerSecurity {
 public:
  struct Options {
    std::string data_dir;
    bool enabled = true;  // false: every caller is an anonymous admin
    api::QueueAcls acls;
    std::string default_queue;
  };
  // Reads (or makes, 0600) DATA_DIR/job-secret. Errors name the file.
  static absl::StatusOr<std::unique_ptr<ServerSecurity>> Open(Options options);

  // The principal behind an "authorization" header's value (see
  // TokenStore::Authenticate); an anonymous admin when security is off.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization);

  // True when `presented` is job `job_id`'s credential.
  bool IsJobCredential(uint64_t job_id, absl::string_view presented) const;
  // JobCredential and JobWorkerSecret under this server's secret (one per
  // job launched: the secret's HMAC states are made once).
  std::string JobCredentialOf(uint64_t job_id) const;
  std::string JobWorkerSecretOf(uint64_t job_id) const;
  // The credential of job `job_id`'s user that its tasks get when their
  // role asks for it (`userCredential: true`): "tyu_" + ID + "_" + 64 hex,
  // an HMAC of the id under this server's secret. Authenticate takes it as
  // the job's user, never as an admin, while `live_job_user` (SetLiveJobUser)
  // says the job has not ended: the server keeps nothing per credential,
  // and a job's end ends it.
  std::string JobUserTokenOf(uint64_t job_id) const;
  // The user of a job that has not ended, by id; nullopt for one that has
  // (or never was). Set once, before the server serves.
  using LiveJobUser = std::function<std::optional<std::string>(uint64_t job_id)>;
  void SetLiveJobUser(LiveJobUser of) { live_job_user_ = std::move(of); }
  // The login token of local account `user` (login.h), for the login
  // socket. FailedPrecondition when a token of the token file speaks for
  // that name (the bootstrap `admin`, say): one name, one kind of credential,
  // so an account cannot take the jobs of the token's user.
  absl::StatusOr<std::string> LoginTokenOf(const std::string& user, bool admin);
  // A secret env value sealed for the store, and opened again (crypto.h's
  // Seal and Open under a key made from the data dir's secret).
  absl::StatusOr<std::string> SealValue(const std::string& plain) const;
  absl::StatusOr<std::string> OpenValue(const std::string& sealed) const;

  // `grant` as text for a URL's path (digits, letters, '-', '_', '.'),
  // MACed under a key made from this server's secret, so only this server
  // (or one with its data dir) makes one and nobody can change one.
  std::string ServiceGrantText(const ServiceGrant& grant) const;
  // The grant `text` says, if this server made it and it has not expired
  // at `now_unix_s`. Errors: PermissionDenied naming why (malformed,
  // changed, expired).
  absl::StatusOr<ServiceGrant> OpenServiceGrant(absl::string_view text, int64_t now_unix_s) const;

  // On a server's first start (no token file yet): issues an admin token
  // and writes a client config with it and `address` to
  // DATA_DIR/admin-client.yaml (and `ca_file`, the CA a TLS server's
  // certificate is signed by; "" for plaintext); returns that path ("" when
  // the token file already existed or security is off).
  absl::StatusOr<std::string> BootstrapAdmin(const std::string& address, const std::string& ca_file = "");

  const AccessPolicy& access() const { return access_; }
  TokenStore& tokens() { return tokens_; }
  bool enabled() const { return enabled_; }

 private:
  ServerSecurity(Options options, std::string job_secret);

  const bool enabled_;
  const std::string data_dir_;
  TokenStore tokens_;
  AccessPolicy access_;
  absl::StatusOr<Principal> AuthenticateJobUserToken(absl::string_view token) const;

  const std::string job_secret_;
  const HmacSha256Key job_mac_;
  const HmacSha256Key service_mac_;  // service grants (a key of their own)
  LiveJobUser live_job_user_;
};

}  // namespace trainyard::security
