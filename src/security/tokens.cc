// The token file and the token store (see tokens.h).
#include "security/tokens.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "security/crypto.h"
#include "security/files.h"

namespace trainyard::security {
namespace {

constexpr absl::string_view kTokenPrefix = "ty_";

const char kWhatToDo[] =
    "run the CLI in the folder where `trainyard up` wrote .trainyard/client.yaml, set TRAINYARD_CONFIG to a "
    "client config file, or ask a cluster admin for a token (trainyard token create USER)";

// An flock on PATH.lock while it lives: two issuers never lose a line.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

std::string TokenFilePath(const std::string& data_dir) { return data_dir + "/tokens"; }

absl::Status ValidateUserName(absl::string_view user_view, absl::string_view what_view) {
  const std::string user(user_view), what(what_view);
  if (user.empty() || user.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a user name is 1 to 64 characters, got ", user.size()));
  }
  for (char c : user) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '@' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(what, ": '", user,
                                                     "' is not a user name (letters, digits, . _ @ - only)"));
    }
  }
  if (user[0] == '-') return absl::InvalidArgumentError(absl::StrCat(what, ": '", user, "' starts with '-'"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> IssueToken(const std::string& path, const std::string& user, bool admin) {
  absl::StatusOr<std::string> random = RandomHex(32);
  if (!random.ok()) return random.status();
  std::string token = absl::StrCat(kTokenPrefix, *random);
  if (absl::Status s = AddToken(path, token, user, admin); !s.ok()) return s;
  return token;
}

absl::Status AddToken(const std::string& path, const std::string& token, const std::string& user, bool admin) {
  if (absl::Status s = ValidateUserName(user); !s.ok()) return s;
  FileLock lock(path);
  absl::StatusOr<std::string> before = ReadWholeFile(path);
  if (!before.ok() && !absl::IsNotFound(before.status())) return before.status();
  std::string text = before.ok() ? *before : "# Trainyard tokens: SHA-256 of the token, user, admin|user\n";
  if (!text.empty() && text.back() != '\n') text += '\n';
  absl::StrAppend(&text, Sha256Hex(token), " ", user, " ", admin ? "admin" : "user", "\n");
  return WritePrivateFile(path, text);
}

absl::StatusOr<Principal> TokenStore::Authenticate(absl::string_view authorization) {
  authorization = absl::StripAsciiWhitespace(authorization);
  if (authorization.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("this server requires a token and none was sent: ", kWhatToDo));
  }
  constexpr absl::string_view kBearer = "bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) {
    return absl::UnauthenticatedError("authorization: expected \"Bearer TOKEN\"");
  }
  absl::string_view token = absl::StripAsciiWhitespace(authorization.substr(kBearer.size()));
  std::string hash = Sha256Hex(token);
  std::optional<Principal> found;
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    changed = RefreshDue();
    if (auto it = by_hash_.find(hash); it != by_hash_.end()) found = it->second;
  }
  if (changed) Changed();
  if (!found) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token is not valid on this server (revoked, mistyped, or made for another cluster): ",
                     kWhatToDo));
  }
  return *found;
}

absl::StatusOr<std::string> TokenStore::Issue(const std::string& user, bool admin) {
  absl::StatusOr<std::string> token = IssueToken(path_, user, admin);
  {
    absl::MutexLock lock(&mu_);
    stamp_ = Stamp();  // read again at the next call, whatever the clock's grain
  }
  if (token.ok() && on_change_) {
    if (absl::Status kept = on_change_(); !kept.ok()) return kept;
  }
  return token;
}

bool TokenStore::HasUser(absl::string_view user) {
  bool changed = false;
  bool has = false;
  {
    absl::MutexLock lock(&mu_);
    changed = RefreshDue();
    has = std::any_of(by_hash_.begin(), by_hash_.end(), [&](const auto& entry) { return entry.second.user == user; });
  }
  if (changed) Changed();
  return has;
}

size_t TokenStore::size() {
  bool changed = false;
  size_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    changed = RefreshDue();
    n = by_hash_.size();
  }
  if (changed) Changed();
  return n;
}

bool TokenStore::RefreshDue() {
  bool due = Refresh();
  if (!due && retry_at_ != absl::InfiniteFuture() && absl::Now() >= retry_at_) due = true;
  if (due) retry_at_ = absl::InfiniteFuture();
  return due;
}

void TokenStore::Changed() {
  if (!on_change_) return;
  absl::Status kept = on_change_();
  if (kept.ok()) return;
  Log(LogLevel::kWarning, "security", "%s (tried again in 1 s)", kept.message());
  // Handed on again by a call a second from now or later, until it is
  // taken: not by every call while the store does not answer.
  absl::MutexLock lock(&mu_);
  retry_at_ = absl::Now() + absl::Seconds(1);
}

bool TokenStore::Refresh() {
  struct stat st {};
  Stamp now;
  if (stat(path_.c_str(), &st) == 0) {
    now = {st.st_ino, st.st_size, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  if (now == stamp_) return false;
  absl::StatusOr<std::string> text = ReadWholeFile(path_);
  if (!text.ok() && !absl::IsNotFound(text.status())) {
    // Kept as it was and read again at the next call: a read that failed
    // (no descriptor left, say) must not lock every user out until the
    // file changes.
    Log(LogLevel::kWarning, "security", "%s", text.status().message());
    return false;
  }
  stamp_ = now;
  by_hash_.clear();
  if (!text.ok()) return true;  // no file: no tokens
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() != 3 || f[0].size() != 64 || (f[2] != "admin" && f[2] != "user") || !ValidateUserName(f[1]).ok()) {
      Log(LogLevel::kWarning, "security", "%s:%d: not \"HASH USER admin|user\"; line ignored", path_, line_no);
      continue;
    }
    by_hash_[std::string(f[0])] = Principal{.user = std::string(f[1]), .admin = f[2] == "admin", .anonymous = false};
  }
  return true;
}

}  // namespace trainyard::security
