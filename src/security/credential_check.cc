// Checking a stream's credential again (see credential_check.h).
#include "security/credential_check.h"

namespace trainyard::security {

bool CredentialCheck::Valid(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (!valid_ || !authenticate_) return valid_;
  if (now - checked_ < every_) return true;
  checked_ = now;
  valid_ = authenticate_(authorization_).ok();
  return valid_;
}

}  // namespace trainyard::security
