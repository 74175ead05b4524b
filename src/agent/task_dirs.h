// The directories a task may use, and who owns them. A task runs in its own
// directory, its checkpoint directory or under the agent's allowed roots
// (CheckWorkingDir); when tasks run as their users the agent gives the task's
// directory and its job's checkpoint directory to the task's account, mode
// 0700, in parents that others may pass through but not list (0711).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/task.h"
#include "agent/task_user.h"

namespace trainyard::agent {

// OK when `working_dir`, with symlinks and ".." resolved, is one of
// `allowed` (resolved the same way) or lies under one. InvalidArgument
// naming workingDir when it does not exist or lies elsewhere; roots that do
// not exist allow nothing.
absl::Status CheckWorkingDir(const std::string& working_dir, const std::vector<std::string>& allowed);

// Makes `dir` (created when missing, with its parents) the account's:
// owner uid:gid, mode 0700, and so the plain files directly in it (the
// agent writes the task's hosts file there). A symlink is refused. An error
// names the directory and the reason.
absl::Status GiveDirTo(const std::string& dir, const TaskAccount& account);

// Sets `dir` to mode 0711 (others may pass through, not list) when it is
// group- or world-readable or not passable; creates it (with its parents)
// when missing. A sticky directory (shared, like /tmp) is left alone. An
// error names the directory.
absl::Status MakePassable(const std::string& dir);

// Confines one launch before it is accepted: resolves the account its user
// runs as (launch->run_as, when the agent switches users), checks its
// workingDir against the task's own directory `task_dir`, its checkpoint
// directory and the agent's roots, and, when switching, gives `task_dir`
// and the checkpoint directory to the account in passable parents.
// InvalidArgument (the task's fault) names the task and the user or
// workingDir; PermissionDenied (the node's) names a directory.
absl::Status ConfineLaunch(const TaskUsers& users, const std::string& task_dir, TaskLaunch* launch);

// Gives a file in a task's directory the owner of that directory (files the
// agent writes there as root must stay readable by the task).
void MatchDirOwner(const std::string& file);

}  // namespace trainyard::agent
