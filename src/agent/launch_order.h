// What an agent checks of a launch order (and of a task files update)
// before it touches its disk: the job and role name, index and attempt
// become paths under the agent's data dir (DATA/work/JOB/ROLE-INDEX, the
// task's logs), and env names become a process environment. The server
// sends only names its spec validation allowed, but the agent does not
// build paths from a peer's strings unchecked: a name such as "../x" would
// put a task's files, directories and logs outside its data dir.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "agent/task.h"
#include "proto/service.pb.h"

namespace trainyard::agent {

// The order's task key valid (TaskKey::Validate: job and role one path
// component each, index not negative), and: attempt not negative; each env
// name not empty, without '=' or NUL. (Paths the server's configuration
// decides, such as TRAINYARD_CHECKPOINT_DIR, are the server's to choose.)
// Errors (InvalidArgument) name the field.
absl::Status CheckLaunchOrder(const v1::TaskSpec& spec);

// The task a launch order names (its places on the node follow from it).
TaskKey KeyOf(const v1::TaskSpec& spec);

}  // namespace trainyard::agent
