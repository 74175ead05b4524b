// Join tokens (see join_tokens.h).
#include "security/join_tokens.h"

#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "security/certs.h"
#include "security/crypto.h"
#include "security/files.h"

namespace trainyard::security {
namespace {

struct Entry {
  std::string hash;
  std::string node;
  int64_t expires_ms = 0;
  bool used = false;
};

absl::StatusOr<std::vector<Entry>> Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (absl::IsNotFound(text.status())) return std::vector<Entry>();
  if (!text.ok()) return text.status();
  std::vector<Entry> out;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    Entry e;
    if (f.size() != 4 || !absl::SimpleAtoi(f[2], &e.expires_ms)) {
      return absl::DataLossError(absl::StrCat(path, ": a line that is not SHA256 NODE EXPIRES USED"));
    }
    e.hash = f[0];
    e.node = f[1];
    e.used = f[3] == "1";
    out.push_back(e);
  }
  return out;
}

// Writes the entries back, leaving out those expired for a day (kept a
// while, so a late try is told "expired", not "unknown").
absl::Status Save(const std::string& path, const std::vector<Entry>& entries, absl::Time now) {
  std::string text;
  for (const Entry& e : entries) {
    if (absl::FromUnixMillis(e.expires_ms) + absl::Hours(24) < now) continue;
    absl::StrAppend(&text, e.hash, " ", e.node, " ", e.expires_ms, " ", e.used ? "1" : "0", "\n");
  }
  return WritePrivateFile(path, text);
}

}  // namespace

std::string JoinTokenFilePath(const std::string& data_dir) { return data_dir + "/join-tokens"; }

absl::StatusOr<std::string> IssueJoinToken(const std::string& path, const std::string& node, absl::Duration ttl,
                                           absl::Time now) {
  if (absl::Status s = CheckNodeNameForCert(node); !s.ok()) return s;
  if (ttl <= absl::ZeroDuration()) return absl::InvalidArgumentError("ttl: must be positive (e.g. 1h)");
  absl::StatusOr<std::vector<Entry>> entries = Load(path);
  if (!entries.ok()) return entries.status();
  absl::StatusOr<std::string> secret = RandomHex(32);
  if (!secret.ok()) return secret.status();
  std::string token = "tyj_" + *secret;
  entries->push_back({Sha256Hex(token), node, absl::ToUnixMillis(now + ttl), false});
  if (absl::Status s = Save(path, *entries, now); !s.ok()) return s;
  return token;
}

namespace {

// The entry of `token` when it may join `node` now; PermissionDenied saying
// why not (unknown, another node's, used, expired).
absl::StatusOr<Entry*> FindUsable(std::vector<Entry>& entries, const std::string& token, const std::string& node,
                                  absl::Time now) {
  std::string hash = Sha256Hex(token);
  for (Entry& e : entries) {
    if (!ConstantTimeEquals(e.hash, hash)) continue;
    if (e.node != node) {
      return absl::PermissionDeniedError(absl::StrCat("the join token is for node '", e.node, "', not '", node, "'"));
    }
    if (e.used) return absl::PermissionDeniedError("the join token was used already (a token joins once)");
    if (absl::FromUnixMillis(e.expires_ms) <= now) {
      return absl::PermissionDeniedError("the join token expired; ask an admin for a new one (trainyard token create --join)");
    }
    return &e;
  }
  return absl::PermissionDeniedError("the join token is not valid on this server");
}

}  // namespace

absl::Status CheckJoinToken(const std::string& path, const std::string& token, const std::string& node,
                            absl::Time now) {
  absl::StatusOr<std::vector<Entry>> entries = Load(path);
  if (!entries.ok()) return entries.status();
  return FindUsable(*entries, token, node, now).status();
}

absl::Status RedeemJoinToken(const std::string& path, const std::string& token, const std::string& node,
                             absl::Time now) {
  absl::StatusOr<std::vector<Entry>> entries = Load(path);
  if (!entries.ok()) return entries.status();
  absl::StatusOr<Entry*> entry = FindUsable(*entries, token, node, now);
  if (!entry.ok()) return entry.status();
  (*entry)->used = true;
  return Save(path, *entries, now);
}

}  // namespace trainyard::security
