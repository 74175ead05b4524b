// Work dir reclaiming. A task owns its dir and may have left anything in
// it: links to /etc, directories nested beyond any stack, files it keeps
// open. The agent (root, when tasks run as their users) removes only
// through descriptors opened with O_NOFOLLOW relative to the dir above, so a
// path it checked cannot be swapped for a link before it acts on it.
#include "agent/task_dir_reclaim.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace trainyard::agent {
namespace {

constexpr char kTrash[] = ".reclaim";
// Deeper directories are moved up into the trash and removed from there:
// recursion and open descriptors stay bounded whatever a task made.
constexpr int kMaxDepth = 32;

std::atomic<uint64_t> next_trash_name{0};

std::string FreshName(const char* prefix) {
  return absl::StrCat(prefix, absl::ToUnixNanos(absl::Now()), "-", next_trash_name.fetch_add(1));
}

// The names in the directory open as `fd` (not "." or "..").
std::vector<std::string> EntryNames(int fd) {
  std::vector<std::string> names;
  int list_fd = dup(fd);
  DIR* d = list_fd < 0 ? nullptr : fdopendir(list_fd);
  if (d == nullptr) {
    if (list_fd >= 0) close(list_fd);
    return names;
  }
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(d);
  return names;
}

struct Remover {
  int trash_fd;
  int64_t freed = 0;
  std::deque<std::string> pending;  // names in the trash still to remove
  std::string first_error;

  void Fail(const std::string& what) {
    if (first_error.empty()) first_error = what;
  }

  // Removes `name` in the directory `parent` and all it holds.
  void Remove(int parent, const std::string& name, int depth) {
    struct stat st;
    if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) Fail(absl::StrCat(name, ": ", strerror(errno)));
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxDepth) {
        std::string up = FreshName("deep-");
        if (renameat(parent, name.c_str(), trash_fd, up.c_str()) != 0) {
          Fail(absl::StrCat("cannot move ", name, " up: ", strerror(errno)));
        } else {
          pending.push_back(up);
        }
        return;
      }
      if (!EmptyDir(parent, name, st, depth)) return;
      if (unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0) {
        Fail(absl::StrCat("cannot remove directory ", name, ": ", strerror(errno)));
        return;
      }
    } else if (unlinkat(parent, name.c_str(), 0) != 0) {
      if (errno != ENOENT) Fail(absl::StrCat("cannot remove ", name, ": ", strerror(errno)));
      return;
    }
    // A file with another name (a hard link elsewhere) frees nothing.
    if (S_ISDIR(st.st_mode) || st.st_nlink <= 1) freed += static_cast<int64_t>(st.st_blocks) * 512;
  }

  // Removes what the directory `name` (as `st` saw it) holds.
  bool EmptyDir(int parent, const std::string& name, const struct stat& st, int depth) {
    int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
      // Mode 000 by its owner (an agent that is not root, tasks as itself).
      fchmodat(parent, name.c_str(), 0700, 0);
      fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      Fail(absl::StrCat("cannot open directory ", name, ": ", strerror(errno)));
      return false;
    }
    struct stat opened;
    if (fstat(fd, &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
      close(fd);  // swapped between the look and the open: not what was looked at
      Fail(absl::StrCat(name, " changed while it was removed"));
      return false;
    }
    if ((opened.st_mode & S_IRWXU) != S_IRWXU) fchmod(fd, 0700);
    for (const std::string& child : EntryNames(fd)) Remove(fd, child, depth + 1);
    close(fd);
    return true;
  }
};

}  // namespace

std::vector<std::string> DueWorkDirs(const std::vector<WorkDirEntry>& dirs, const std::set<std::string>& live,
                                     const std::map<std::string, absl::Time>& ended, absl::Duration retention,
                                     absl::Time now) {
  std::vector<std::string> due;
  for (const WorkDirEntry& d : dirs) {
    if (live.count(d.place) > 0) continue;
    auto it = ended.find(d.place);
    absl::Time since = it != ended.end() ? it->second : d.modified;
    if (since + retention <= now) due.push_back(d.place);
  }
  return due;
}

std::vector<WorkDirEntry> ListWorkDirs(const std::string& work_root) {
  std::vector<WorkDirEntry> out;
  std::error_code ec;
  for (const auto& job : std::filesystem::directory_iterator(work_root, ec)) {
    std::string job_name = job.path().filename().string();
    if (job_name.empty() || job_name[0] == '.' || !job.is_directory(ec) || job.is_symlink(ec)) continue;
    std::error_code inner;
    for (const auto& task : std::filesystem::directory_iterator(job.path(), inner)) {
      std::string task_name = task.path().filename().string();
      struct stat st;
      if (task_name.empty() || task_name[0] == '.' || lstat(task.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        continue;
      }
      out.push_back({.place = absl::StrCat(job_name, "/", task_name), .modified = absl::FromTimeT(st.st_mtime)});
    }
  }
  return out;
}

absl::Status MoveToTrash(const std::string& work_root, const std::string& place) {
  std::string trash = absl::StrCat(work_root, "/", kTrash);
  if (mkdir(trash.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", trash, ": ", strerror(errno)));
  }
  std::string from = absl::StrCat(work_root, "/", place);
  std::string to = absl::StrCat(trash, "/", FreshName("task-"));
  // rename() moves a symlink itself, never what it points to; the job
  // level above the task dir is the agent's, so `from` is the agent's path.
  if (rename(from.c_str(), to.c_str()) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(from, " is gone"));
    return absl::PermissionDeniedError(absl::StrCat("cannot move ", from, " to ", to, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

TrashEmptied EmptyTrash(const std::string& work_root) {
  std::string trash = absl::StrCat(work_root, "/", kTrash);
  int fd = open(trash.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    return {.status = absl::PermissionDeniedError(absl::StrCat("cannot open ", trash, ": ", strerror(errno)))};
  }
  Remover r{.trash_fd = fd};
  for (std::string& name : EntryNames(fd)) r.pending.push_back(std::move(name));
  while (!r.pending.empty()) {
    std::string name = std::move(r.pending.front());
    r.pending.pop_front();
    r.Remove(fd, name, 0);
  }
  close(fd);
  TrashEmptied out{.freed_bytes = r.freed};
  if (!r.first_error.empty()) {
    out.status = absl::PermissionDeniedError(absl::StrCat("reclaiming task dirs in ", trash, ": ", r.first_error));
  }
  return out;
}

void RemoveIfEmpty(const std::string& work_root, const std::string& job_dir) {
  // rmdir refuses a symlink and a directory that is not empty.
  (void)rmdir(absl::StrCat(work_root, "/", job_dir).c_str());  // not empty or gone: nothing to do
}

}  // namespace trainyard::agent
