// Which local account a task runs as. When the agent runs as root, each task
// runs as the account its cluster user (the job's `user`, as the server
// records it) maps to: by the agent's --task-user-map, else the account of
// the same name. Root is refused unless the agent allows it. When the agent
// is not root it cannot switch users: tasks run as the agent's own account.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/task.h"

namespace trainyard::agent {

// Looks up local accounts. The real one (SystemAccounts) reads the password
// and group databases; tests give a fixed list.
class AccountDirectory {
 public:
  virtual ~AccountDirectory() = default;
  // The account of that name with its primary and supplementary groups;
  // nullopt when there is none.
  virtual std::optional<TaskAccount> ByName(const std::string& name) const = 0;
  // The account of that uid; nullopt when the uid has no account.
  virtual std::optional<TaskAccount> ByUid(uid_t uid) const = 0;
};
const AccountDirectory& SystemAccounts();

// The parsed --task-user-map: lines `cluster-user: local-account`, with
// `"*": account` for every user without a line of their own; a bare number
// names a uid. `#` starts a comment; names may be quoted ("*" must be).
class TaskUserMap {
 public:
  // Errors name `origin` (the file), the line and the reason: a line
  // without ':', an empty name, a user given twice.
  static absl::StatusOr<TaskUserMap> Parse(absl::string_view text, absl::string_view origin);
  // Parse of the file's content; an error names the file when it cannot be read.
  static absl::StatusOr<TaskUserMap> Load(const std::string& path);
  // The local account named for `cluster_user`: its own line, else "*",
  // else the cluster user's own name.
  std::string LocalAccountFor(const std::string& cluster_user) const;
  // True when the map itself names the account for `cluster_user` (its own
  // line or "*"), not the default of the same name.
  bool Names(const std::string& cluster_user) const {
    return users_.contains(cluster_user) || everyone_.has_value();
  }

 private:
  std::map<std::string, std::string> users_;
  std::optional<std::string> everyone_;  // "*"
};

struct TaskUserOptions {
  TaskUserMap map;
  bool allow_root = false;  // --allow-root-tasks: a user may map to uid 0
  // --task-workdir-roots: where a workingDir may lie besides the task's own
  // and checkpoint directories. Empty: the task account's home.
  std::vector<std::string> workdir_roots;
  // nullopt: switch when the agent runs as root (euid 0). Tests set it.
  std::optional<bool> switch_users;
  const AccountDirectory* accounts = nullptr;  // nullptr: SystemAccounts()
};

class TaskUsers {
 public:
  explicit TaskUsers(TaskUserOptions options);
  // True when tasks run as their mapped accounts (the agent is root).
  bool switching() const { return switch_users_; }
  // The account the tasks of `cluster_user` run as: the mapped one when
  // switching, else the agent's own. InvalidArgument naming the user when
  // no account exists, or when it is root (uid 0) and root is not allowed.
  absl::StatusOr<TaskAccount> Resolve(const std::string& cluster_user) const;
  // The roots a workingDir may lie under for `account` (besides the task's
  // own and checkpoint directories).
  std::vector<std::string> WorkdirRoots(const TaskAccount& account) const;

 private:
  TaskUserOptions options_;
  bool switch_users_;
};

// The real path of `path` (links resolved, UTF-8) when `account` may reach
// it (search on every directory above it) and read it (and search it, a
// directory), by the mode bits, and no account but root may change what the
// real path names: every directory above it is root's and writable by root
// alone, or sticky (as /tmp) with an entry of root's. Else PermissionDenied
// naming the directory and why. ACLs are not read: a path
// only an ACL opens to the account is refused. The agent reads images and
// mounts volumes as root, by the real path this returns: a task gets only
// what its account sees, and cannot swap a link in after the check.
absl::StatusOr<std::string> CheckReadableBy(const std::string& path, const TaskAccount& account);

}  // namespace trainyard::agent
