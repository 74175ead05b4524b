// CredentialCheck: whether the credential a long answer began with still
// holds. A stream (a followed log, the watch) is authenticated once, when
// it opens; a token removed from the server's token file meanwhile must
// not go on receiving. The stream asks Valid() before it sends more; the
// token is checked again at most every `every` (the token store reads its
// file again when it changed), so a revoked token's stream ends within
// that time of its next piece.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "security/principal.h"

namespace trainyard::security {

class CredentialCheck {
 public:
  // Authenticates an "authorization" value (ServerSecurity::Authenticate);
  // nullptr: nothing to check (a server without security).
  using Authenticator = std::function<absl::StatusOr<Principal>(absl::string_view authorization)>;

  // `opened`: when the stream's credential was last checked (its open).
  CredentialCheck(Authenticator authenticate, std::string authorization, absl::Time opened,
                  absl::Duration every = absl::Seconds(5))
      : authenticate_(std::move(authenticate)), authorization_(std::move(authorization)), every_(every),
        checked_(opened) {}

  // False once the credential no longer authenticates (and from then on).
  bool Valid(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Authenticator authenticate_;
  const std::string authorization_;
  const absl::Duration every_;
  absl::Mutex mu_;
  absl::Time checked_ ABSL_GUARDED_BY(mu_);
  bool valid_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace trainyard::security
