// Login tokens (see login.h).
#include "security/login.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "security/crypto.h"
#include "security/tokens.h"

namespace trainyard::security {
namespace {

constexpr absl::string_view kPrefix = "tyl_";

std::string Mac(absl::string_view secret, absl::string_view kind, absl::string_view user) {
  return HmacSha256Hex(secret, absl::StrCat("trainyard login ", kind, " ", user));
}

}  // namespace

std::string LoginToken(absl::string_view secret, absl::string_view user, bool admin) {
  absl::string_view kind = admin ? "a" : "u";
  return absl::StrCat(kPrefix, kind, "_", user, "_", Mac(secret, kind, user));
}

bool IsLoginToken(absl::string_view token) { return absl::StartsWith(token, kPrefix); }

absl::StatusOr<Principal> AuthenticateLoginToken(absl::string_view secret, absl::string_view token) {
  auto bad = absl::UnauthenticatedError(
      "the login token is not valid here: run `trainyard login` again (the server's data dir may be another)");
  if (!IsLoginToken(token)) return bad;
  absl::string_view rest = token.substr(kPrefix.size());
  // kind _ user _ mac; a user name has no '_'-free guarantee, so the mac is
  // the last 64 characters and the kind the first.
  if (rest.size() < 2 + 1 + 1 + 64 || rest[1] != '_' || rest[rest.size() - 65] != '_') return bad;
  absl::string_view kind = rest.substr(0, 1);
  if (kind != "a" && kind != "u") return bad;
  absl::string_view user = rest.substr(2, rest.size() - 2 - 65);
  absl::string_view mac = rest.substr(rest.size() - 64);
  if (!ValidateUserName(user).ok() || !ConstantTimeEquals(Mac(secret, kind, user), mac)) return bad;
  return Principal{.user = std::string(user), .admin = kind == "a", .anonymous = false};
}

}  // namespace trainyard::security
