// The task user map's parser, the account lookup through getpwnam_r /
// getgrouplist, and the resolution of a cluster user to a local account.
#include "agent/task_user.h"

#include <algorithm>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace trainyard::agent {
namespace {

// The first uid of ordinary accounts (Debian's UID_MIN in /etc/login.defs).
constexpr uint32_t kFirstOrdinaryUid = 1000;


TaskAccount FromPasswd(const passwd& pw) {
  TaskAccount a{.name = pw.pw_name, .uid = pw.pw_uid, .gid = pw.pw_gid, .home = pw.pw_dir ? pw.pw_dir : ""};
  int count = 32;
  std::vector<gid_t> groups(count);
  while (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) groups.resize(count);
  groups.resize(count);
  a.groups.assign(groups.begin(), groups.end());
  return a;
}

class SystemAccountDirectory : public AccountDirectory {
 public:
  std::optional<TaskAccount> ByName(const std::string& name) const override {
    passwd pw, *found = nullptr;
    std::vector<char> buf(16384);
    if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
    return FromPasswd(pw);
  }
  std::optional<TaskAccount> ByUid(uid_t uid) const override {
    passwd pw, *found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
    return FromPasswd(pw);
  }
};

// A name as written: surrounding spaces dropped, then one pair of quotes.
std::string Unquote(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') && text.back() == text.front()) {
    text = text.substr(1, text.size() - 2);
  }
  return std::string(text);
}

// The position of the first `stop` outside quotes, or npos.
size_t FirstUnquoted(absl::string_view line, char stop) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == stop) {
      return i;
    }
  }
  return absl::string_view::npos;
}

// Drops a `#` comment that is not inside quotes.
absl::string_view WithoutComment(absl::string_view line) { return line.substr(0, FirstUnquoted(line, '#')); }

// The position of the ':' that ends the cluster user (outside quotes).
size_t KeyEnd(absl::string_view line) { return FirstUnquoted(line, ':'); }

}  // namespace

const AccountDirectory& SystemAccounts() {
  static const SystemAccountDirectory* accounts = new SystemAccountDirectory();
  return *accounts;
}

absl::StatusOr<TaskUserMap> TaskUserMap::Parse(absl::string_view text, absl::string_view origin) {
  TaskUserMap map;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view line = absl::StripAsciiWhitespace(WithoutComment(raw));
    if (line.empty()) continue;
    std::string where = absl::StrCat(origin, " line ", number, ": ");
    size_t colon = KeyEnd(line);
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'", line, "' is not `cluster-user: local-account`"));
    }
    std::string user = Unquote(line.substr(0, colon));
    std::string account = Unquote(line.substr(colon + 1));
    if (user.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "the cluster user is empty"));
    if (account.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the local account of '", user, "' is empty"));
    }
    bool taken = user == "*" ? map.everyone_.has_value() : map.users_.count(user) > 0;
    if (taken) return absl::InvalidArgumentError(absl::StrCat(where, "'", user, "' is mapped twice"));
    if (user == "*") {
      map.everyone_ = account;
    } else {
      map.users_[user] = account;
    }
  }
  return map;
}

absl::StatusOr<TaskUserMap> TaskUserMap::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--task-user-map ", path, ": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

std::string TaskUserMap::LocalAccountFor(const std::string& cluster_user) const {
  auto it = users_.find(cluster_user);
  if (it != users_.end()) return it->second;
  return everyone_.value_or(cluster_user);
}

TaskUsers::TaskUsers(TaskUserOptions options)
    : options_(std::move(options)), switch_users_(options_.switch_users.value_or(geteuid() == 0)) {
  if (options_.accounts == nullptr) options_.accounts = &SystemAccounts();
}

absl::StatusOr<TaskAccount> TaskUsers::Resolve(const std::string& cluster_user) const {
  const AccountDirectory& accounts = *options_.accounts;
  if (!switch_users_) {
    // Tasks run as the agent; its account only gives the default workdir root.
    uid_t uid = geteuid();
    TaskAccount self = accounts.ByUid(uid).value_or(TaskAccount{.uid = uid, .gid = getegid()});
    return self;
  }
  std::string local = options_.map.LocalAccountFor(cluster_user);
  bool mapped = options_.map.Names(cluster_user);
  uint32_t uid = 0;
  std::optional<TaskAccount> account;
  // A bare uid only where the map says so: a cluster user named "1001"
  // must not become uid 1001 by default.
  if (mapped && absl::SimpleAtoi(local, &uid)) {
    // A bare uid: its account when it has one, else that uid with the
    // group of the same number and no supplementary groups.
    account = accounts.ByUid(uid).value_or(TaskAccount{.uid = uid, .gid = uid});
  } else {
    account = accounts.ByName(local);
  }
  if (!account) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user '", cluster_user, "': no local account '", local,
        "' on this node to run its tasks as; map the user to one with a line `", cluster_user,
        ": ACCOUNT` in the agent's --task-user-map (for `trainyard up`, in a file given to its --task-user-map)"));
  }
  bool root_group = account->gid == 0 ||
                    std::find(account->groups.begin(), account->groups.end(), 0u) != account->groups.end();
  if ((account->uid == 0 || root_group) && !options_.allow_root) {
    return absl::InvalidArgumentError(absl::StrCat("user '", cluster_user, "' maps to root ('", local,
                                                   "': uid 0 or group 0)",
                                                   ", which runs no tasks unless the agent has --allow-root-tasks"));
  }
  // By default (no line of the map) only ordinary accounts: a cluster user
  // named after a service account (postgres, www-data) must not run as it.
  if (!mapped && account->uid != 0 && account->uid < kFirstOrdinaryUid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user '", cluster_user, "': local account '", local, "' is a system account (uid ", account->uid,
        " < ", kFirstOrdinaryUid, "); map it explicitly in --task-user-map to run tasks as it"));
  }
  return *account;
}

std::vector<std::string> TaskUsers::WorkdirRoots(const TaskAccount& account) const {
  if (!options_.workdir_roots.empty()) return options_.workdir_roots;
  // A home of "/" (some system accounts) would allow everything.
  if (account.home.empty() || account.home == "/") return {};
  return {account.home};
}

namespace {

// What the agent writes as JSON (the bundle, the task record) must be
// UTF-8, as its JSON library checks it.
bool ValidUtf8(const std::string& s) {
  try {
    nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// The permission bits of `st` that apply to `account` (7 = rwx).
int BitsFor(const struct stat& st, const TaskAccount& account) {
  if (account.uid == 0) return 7;
  if (st.st_uid == account.uid) return (st.st_mode >> 6) & 7;
  bool group = st.st_gid == account.gid ||
               std::find(account.groups.begin(), account.groups.end(), st.st_gid) != account.groups.end();
  return group ? (st.st_mode >> 3) & 7 : st.st_mode & 7;
}

}  // namespace

absl::StatusOr<std::string> CheckReadableBy(const std::string& path, const TaskAccount& account) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, " cannot be read: ", strerror(errno)));
  }
  const std::string who = account.name.empty() ? absl::StrCat("uid ", account.uid) : account.name;
  std::string walked;
  std::vector<std::string> parts = absl::StrSplit(std::string(real), '/', absl::SkipEmpty());
  for (size_t i = 0; i <= parts.size(); ++i) {
    const std::string at = walked.empty() ? "/" : walked;
    struct stat st;
    if (stat(at.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(at, ": ", strerror(errno)));
    bool last = i == parts.size();
    int need = last ? (S_ISDIR(st.st_mode) ? 5 : 4) : 1;
    if ((BitsFor(st, account) & need) != need) {
      return absl::PermissionDeniedError(absl::StrCat(who, " may not ", last ? "read " : "search ", at));
    }
    if (last) break;
    const std::string next = absl::StrCat(walked, "/", parts[i]);
    // Nobody but root may rename the entry below and put a link there: the
    // directory is root's and writable by root alone, or sticky (as /tmp)
    // with an entry of root's.
    if (account.uid != 0) {
      struct stat child;
      bool roots = st.st_uid == 0 && (st.st_mode & 022) == 0;
      bool sticky_guards = st.st_uid == 0 && (st.st_mode & S_ISVTX) != 0 && lstat(next.c_str(), &child) == 0 &&
                           child.st_uid == 0;
      if (!roots && !sticky_guards) {
        return absl::PermissionDeniedError(absl::StrCat(
            "an account other than root may change ", at, ": what the node mounts or reads as root for ", who,
            " must lie under directories only root can change"));
      }
    }
    walked = next;
  }
  if (!ValidUtf8(real)) return absl::InvalidArgumentError(absl::StrCat(path, " leads to a path that is not UTF-8"));
  return std::string(real);
}

}  // namespace trainyard::agent
