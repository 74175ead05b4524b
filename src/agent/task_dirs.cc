// Working directory checks and directory ownership for tasks. Ownership is
// changed through descriptors opened with O_NOFOLLOW, so a symlink planted
// in place of a directory is refused rather than followed.
#include "agent/task_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trainyard::agent {
namespace {

// The path with symlinks and ".." resolved; nullopt when it does not exist.
std::optional<std::string> Resolved(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return std::nullopt;
  std::string out = real;
  free(real);
  return out;
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || absl::StartsWith(path, root + "/");
}

// Plain files directly in the directory open as `dir_fd` get uid:gid.
absl::Status ChownFiles(int dir_fd, const std::string& dir, const TaskAccount& account) {
  int list_fd = dup(dir_fd);
  DIR* d = list_fd < 0 ? nullptr : fdopendir(list_fd);
  if (d == nullptr) {
    if (list_fd >= 0) close(list_fd);
    return absl::PermissionDeniedError(absl::StrCat("cannot list ", dir, ": ", strerror(errno)));
  }
  absl::Status status;
  while (dirent* e = readdir(d)) {
    struct stat st;
    // A hard link may be anyone's file (a task's link to /etc/shadow): only
    // files with one name are handed over.
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_nlink != 1) {
      continue;
    }
    if (st.st_uid == account.uid && st.st_gid == account.gid) continue;
    if (fchownat(dir_fd, e->d_name, account.uid, account.gid, AT_SYMLINK_NOFOLLOW) != 0) {
      status = absl::PermissionDeniedError(
          absl::StrCat("cannot give ", dir, "/", e->d_name, " to uid ", account.uid, ": ", strerror(errno)));
      break;
    }
  }
  closedir(d);
  return status;
}

}  // namespace

absl::Status CheckWorkingDir(const std::string& working_dir, const std::vector<std::string>& allowed) {
  std::optional<std::string> real = Resolved(working_dir);
  if (!real) {
    return absl::InvalidArgumentError(absl::StrCat("workingDir ", working_dir, ": ", strerror(errno)));
  }
  std::string roots;
  for (const std::string& root : allowed) {
    std::optional<std::string> real_root = Resolved(root);
    if (real_root && IsUnder(*real, *real_root)) return absl::OkStatus();
    if (!root.empty()) absl::StrAppend(&roots, roots.empty() ? "" : ", ", root);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("workingDir ", working_dir, real == working_dir ? "" : absl::StrCat(" (", *real, ")"),
                   " is not under a directory tasks may use (", roots.empty() ? "none" : roots,
                   "; see the agent's --task-workdir-roots)"));
}

absl::Status GiveDirTo(const std::string& dir, const TaskAccount& account) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot open directory ", dir, ": ", strerror(errno)));
  absl::Status status;
  struct stat st;
  if (fstat(fd, &st) != 0 || (st.st_uid != 0 && st.st_uid != account.uid)) {
    // Made by another account (a checkpoint root anyone may write, a name
    // guessed ahead): what it holds is not this task's to trust.
    status = absl::PermissionDeniedError(absl::StrCat("directory ", dir, " belongs to uid ", st.st_uid,
                                                      ", not to uid ", account.uid, " or the agent; it is not "
                                                      "handed to the task"));
  } else if (fchown(fd, account.uid, account.gid) != 0 || fchmod(fd, 0700) != 0) {
    status = absl::PermissionDeniedError(
        absl::StrCat("cannot give directory ", dir, " to uid ", account.uid, ": ", strerror(errno)));
  } else {
    status = ChownFiles(fd, dir, account);
  }
  close(fd);
  return status;
}

absl::Status MakePassable(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create directory ", dir, ": ", strerror(errno)));
  }
  mode_t mode = st.st_mode & 07777;
  // A shared sticky directory (a checkpoint root of /tmp) is left as it is:
  // closing it would lock its other users out.
  if ((mode & S_ISVTX) != 0) return absl::OkStatus();
  if ((mode & 0066) == 0 && (mode & 0011) == 0011) return absl::OkStatus();
  mode_t wanted = (mode & 06700) | 0011;
  if (chmod(dir.c_str(), wanted) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot set mode 0711 on ", dir, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ConfineLaunch(const TaskUsers& users, const std::string& task_dir, TaskLaunch* launch) {
  std::string task = launch->key.ToString();
  absl::StatusOr<TaskAccount> account = users.Resolve(launch->user);
  if (!account.ok()) return absl::InvalidArgumentError(absl::StrCat("task ", task, ": ", account.status().message()));
  std::vector<std::string> roots = {task_dir};
  if (!launch->checkpoint_dir.empty()) roots.push_back(launch->checkpoint_dir);
  for (std::string& root : users.WorkdirRoots(*account)) roots.push_back(std::move(root));
  // In an image the working dir is the container's, not the node's.
  if (absl::Status s = launch->image ? absl::OkStatus() : CheckWorkingDir(launch->working_dir, roots); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task, ": ", s.message()));
  }
  if (!users.switching()) return absl::OkStatus();
  launch->run_as = *account;
  // The work dir of an earlier job of the same name, another account's:
  // scratch that is not this job's (removed, links and all, never followed).
  struct stat st;
  if (lstat(task_dir.c_str(), &st) == 0 && st.st_uid != 0 && st.st_uid != account->uid) {
    std::error_code ec;
    std::filesystem::remove_all(task_dir, ec);
  }
  for (const std::string& dir : {task_dir, launch->checkpoint_dir}) {
    if (dir.empty()) continue;
    if (absl::Status s = GiveDirTo(dir, *account); !s.ok()) return s;
    std::string parent = std::filesystem::path(dir).parent_path().string();
    if (absl::Status s = MakePassable(parent); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace trainyard::agent
