// Files that hold secrets: written 0600 (their directory made 0700), whole
// or not at all (a temporary file renamed over the old one).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainyard::security {

// Writes `content` to `path`, mode 0600, replacing it atomically; makes the
// parent directory (mode 0700) when it does not exist. Errors name the path.
absl::Status WritePrivateFile(const std::string& path, const std::string& content);

// The whole file; NotFound when it does not exist, other errors name it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// The secret kept in `path` (64 hex digits), made on first use. Errors name
// the path (a file that exists but holds no secret is an error, not
// replaced: jobs' credentials hang on it).
absl::StatusOr<std::string> LoadOrCreateSecret(const std::string& path);

}  // namespace trainyard::security
