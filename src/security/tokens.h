// Bearer tokens (docs/security.md, "Credentials"): random, issued by an admin
// for a user name, kept as SHA-256 hashes in the server's token file
// (DATA_DIR/tokens, 0600), one per line: "HASH USER admin|user". The server
// reads the file again when it changes, so a token added (or a line removed)
// takes effect without a restart.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "security/principal.h"

namespace trainyard::security {

// The token file of a server data dir.
std::string TokenFilePath(const std::string& data_dir);

// OK when `user` may be a principal's name: 1 to 64 of A-Z a-z 0-9 . _ @ -,
// not starting with '-'. Errors name `what` (e.g. "USER") and the rule.
absl::Status ValidateUserName(absl::string_view user, absl::string_view what = "user");

// Issues a token for `user` (an admin's when `admin`): appends its hash to
// the token file at `path` (made 0600 if missing) and returns the token,
// which is nowhere else. Errors: InvalidArgument for a bad name, others
// name the file.
absl::StatusOr<std::string> IssueToken(const std::string& path, const std::string& user, bool admin);

// Adds `token` (made elsewhere, e.g. by a test harness) for `user` to the
// token file at `path`, as IssueToken does with the one it makes.
absl::Status AddToken(const std::string& path, const std::string& token, const std::string& user, bool admin);

// The tokens a server accepts, from its token file. Thread-safe.
class TokenStore {
 public:
  explicit TokenStore(std::string path) : path_(std::move(path)) {}

  // The principal that `authorization` (an "authorization" header's value,
  // "Bearer TOKEN") speaks for. Errors: Unauthenticated, with a message
  // that says what to do, for no header, another scheme, or a token the
  // file does not hold.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization) ABSL_LOCKS_EXCLUDED(mu_);

  // IssueToken on this store's file; the next Authenticate sees it. With
  // an on-change hook, the token is handed out only once the hook took it
  // (its error is Issue's).
  absl::StatusOr<std::string> Issue(const std::string& user, bool admin) ABSL_LOCKS_EXCLUDED(mu_);

  // Called, without this store's lock, after Issue wrote a token and after
  // a read found the file changed by someone else (an admin's edit; the
  // hook's error is then logged): a server of several keeps the file in the
  // store that they share (server/shared_files.h).
  // REQUIRES: set once, before the store is used from other threads.
  using OnChange = std::function<absl::Status()>;
  void SetOnChange(OnChange on_change) { on_change_ = std::move(on_change); }

  // How many tokens the file holds now.
  size_t size() ABSL_LOCKS_EXCLUDED(mu_);
  // True when a token of the file speaks for `user`.
  bool HasUser(absl::string_view user) ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  struct Stamp {
    ino_t inode = 0;
    off_t size = -1;
    int64_t mtime_ns = -1;
    bool operator==(const Stamp&) const = default;
  };
  // Reads the file again when it changed since the last read; true when it
  // did (the on-change hook is then called, after the lock is let go).
  bool Refresh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refresh, or true when a hook call that failed is due again.
  bool RefreshDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The on-change hook for a change Refresh found; one that fails is
  // called again at a read a second later or more.
  void Changed() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string path_;
  OnChange on_change_;
  absl::Mutex mu_;
  Stamp stamp_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // a failed hook call, due again
  absl::flat_hash_map<std::string, Principal> by_hash_ ABSL_GUARDED_BY(mu_);
};

}  // namespace trainyard::security
