// The few primitives of cryptography Trainyard uses (OpenSSL's libcrypto):
// random bytes from the kernel's generator, SHA-256 and HMAC-SHA256, as
// lowercase hex. One home, so no caller rolls its own.
#pragma once

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace trainyard::security {

// `bytes` random bytes as 2*bytes hex digits. Errors: Internal when the
// generator cannot be read (never in practice).
absl::StatusOr<std::string> RandomHex(int bytes);

// SHA-256 of `data`, 64 hex digits.
std::string Sha256Hex(absl::string_view data);

// HMAC-SHA256 of `data` under `key`, 64 hex digits.
std::string HmacSha256Hex(absl::string_view key, absl::string_view data);

// HmacSha256Hex under one key, for a key used for every job: the key's inner
// and outer SHA-256 states are made once, so a MAC costs two short digests
// (OpenSSL 3's one-shot HMAC looks its algorithms up by name on every call).
// Thread-safe: Hex only reads the states.
class HmacSha256Key {
 public:
  explicit HmacSha256Key(absl::string_view key);
  ~HmacSha256Key();
  HmacSha256Key(const HmacSha256Key&) = delete;
  HmacSha256Key& operator=(const HmacSha256Key&) = delete;

  // HmacSha256Hex(key, data).
  std::string Hex(absl::string_view data) const;

 private:
  struct States;
  std::unique_ptr<States> states_;
};

// True when `a` equals `b`, in time that does not depend on where they
// differ (for comparing secrets).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// `plain` sealed with AES-256-GCM under SHA-256(`key`) and a random nonce,
// as text: "sealed:v1:" + base64(nonce, ciphertext, tag). Opening it needs
// the same key and tells a changed byte.
absl::StatusOr<std::string> Seal(absl::string_view key, absl::string_view plain);
// What Seal(key, ...) sealed. Errors: InvalidArgument when `sealed` is not
// sealed text, or was sealed under another key or changed.
absl::StatusOr<std::string> Open(absl::string_view key, absl::string_view sealed);
// True when `text` has Seal's form.
bool IsSealed(absl::string_view text);

}  // namespace trainyard::security
