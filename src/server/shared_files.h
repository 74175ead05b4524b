// The files of a server's data dir that every server of one etcd store must
// hold alike (docs/deploy.md, "What the servers share"): the token file, the
// join tokens and the jobs' secret (job credentials, sealed secret values,
// login tokens, service links). A failover must lose none of them: a token
// issued by one leader is a token of the cluster, and a running job's
// credential must still hold at the next leader.
//
// They are kept in the store as metadata ("shared-file/NAME"). A server that
// takes the lead adopts the store's copies in place of its own files (Adopt)
// before it reads any of them; a change the leader makes (a token issued, a
// join token used, an admin's edit of the token file) goes into the store
// (Publish), before the change is answered where one is. A file the store
// does not hold yet (the first leader's) is put there as it is.
//
// The token files hold only hashes, as on disk. The jobs' secret is never in
// the store in clear: it is sealed under a key made from the cluster CA's
// private key, which every server holds (its --tls-dir) and the store, its
// backups and their readers do not. Without one (a plaintext cluster) the
// jobs' secret is not shared. A server on SQLite is the only one and shares
// nothing.
#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/state_store.h"

namespace trainyard::server {

class SharedFiles {
 public:
  // The files shared, by name in the data dir.
  static constexpr const char* kJobSecret = "job-secret";
  static constexpr const char* kTokens = "tokens";
  static constexpr const char* kJoinTokens = "join-tokens";
  static const std::vector<std::string>& Names();
  // The metadata key that holds file `name`.
  static std::string MetaKey(const std::string& name);
  // The key the jobs' secret is sealed under in the store, made from the
  // cluster CA's private key (security::PrivateKeyDer: the same for every
  // copy of the key, whatever its PEM form).
  static std::string SealKeyFromCaKey(const std::string& ca_key_der);

  // `seal_key`: SealKeyFromCaKey of the cluster's CA; "" shares no jobs'
  // secret. REQUIRES: `store` outlives this.
  SharedFiles(StateStore* store, std::string data_dir, std::string seal_key)
      : store_(store), data_dir_(std::move(data_dir)), seal_key_(std::move(seal_key)) {}

  // For each file the store holds, replaces the local file (0600) by the
  // store's copy where they differ, and says so in the log. Errors name the
  // file that could not be written, the store's read that failed, or a
  // jobs' secret sealed under another CA than this server's.
  absl::Status Adopt() ABSL_LOCKS_EXCLUDED(mu_);

  // Puts file `name`'s text into the store when it differs from the store's
  // copy, and returns once that is durable. A file that does not exist puts
  // nothing (the store's copy stays). Errors name the file, or say the
  // store's write failed.
  absl::Status Publish(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // Publish for every file; the first error, after trying them all.
  absl::Status PublishAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::string PathOf(const std::string& name) const { return data_dir_ + "/" + name; }
  // File `name`'s text as the store keeps it (the jobs' secret opened);
  // NotFound when it holds none.
  absl::StatusOr<std::string> Held(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StateStore* const store_;
  const std::string data_dir_;
  const std::string seal_key_;
  // One Publish at a time: each compares with the store's copy and puts in
  // the order the files changed.
  absl::Mutex mu_;
};

}  // namespace trainyard::server
