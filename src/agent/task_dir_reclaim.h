// Reclaiming finished tasks' work dirs (DATA/work/PLACE, TaskKey::Place)
// after the agent's --task-dir-retention, so a node does not fill up with
// the scratch of tasks long gone. Logs (DATA/logs) and checkpoint dirs are
// never touched here. Two parts: which dirs are due (a pure function of what
// is on disk, what runs and the time, so tests pass the time in), and
// removing a tree without ever following a symlink a task planted in it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace trainyard::agent {

// One task dir found under DATA/work: its place ("job_7/worker-0") and when
// it last changed (its mtime).
struct WorkDirEntry {
  std::string place;
  absl::Time modified;
};

// The places of `dirs` due for removal at `now`: a place in `live` (a task
// that runs, waits to restart or is being launched) never; a place in
// `ended` (when its task last ended for good, as this agent saw it) once
// `retention` has passed since then; any other place (ended before this
// agent started, or a leftover) once `retention` has passed since it last
// changed. A retention of 0 reclaims at once.
std::vector<std::string> DueWorkDirs(const std::vector<WorkDirEntry>& dirs, const std::set<std::string>& live,
                                     const std::map<std::string, absl::Time>& ended, absl::Duration retention,
                                     absl::Time now);

// The task dirs DATA/work/J/T that are there now (two levels; entries that
// are not directories, symlinks included, and names beginning with '.' are
// left out).
std::vector<WorkDirEntry> ListWorkDirs(const std::string& work_root);

// Moves the task dir WORK/PLACE into the trash WORK/.reclaim (created 0700)
// under a fresh name, so nothing relaunched at that place can meet the
// removal. REQUIRES: no launch of PLACE is under way (the caller's lock).
// NotFound when the dir is gone; an error naming it otherwise.
absl::Status MoveToTrash(const std::string& work_root, const std::string& place);

// Empties WORK/.reclaim: removes every tree in it through directory
// descriptors (openat with O_NOFOLLOW, unlinkat), so a symlink is removed,
// never followed out of the data dir, and a directory swapped for a link
// while it is removed is refused. Deep trees are removed with bounded depth
// and descriptors. Returns the bytes freed (blocks of files with no other
// link, and of directories) and, when something could not be removed (what
// could, is), an error naming the first such thing.
struct TrashEmptied {
  int64_t freed_bytes = 0;
  absl::Status status;
};
TrashEmptied EmptyTrash(const std::string& work_root);

// Removes WORK/J when it is an empty directory (its last task dir was
// reclaimed). Errors are ignored: a launch may have put a task dir there.
void RemoveIfEmpty(const std::string& work_root, const std::string& job_dir);

}  // namespace trainyard::agent
