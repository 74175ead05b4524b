// Checks shared by every StateStore: what a batch must satisfy before it is
// applied (so both stores reject the same batches with the same messages),
// and the consistency checks of CheckIntegrity that look at records rather
// than at files.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/trainyard.pb.h"

namespace trainyard::store_checks {

// Returns InvalidArgument when a job to create has no id or name, or two of
// its tasks share (role, index), or a task is invalid.
absl::Status ValidateNewJob(const v1::JobRecord& job);

// Returns InvalidArgument when an updated job has no id or name, or lists two
// tasks with the same (role, index), or a task is invalid.
absl::Status ValidateUpdatedJob(const v1::JobRecord& job);

// Returns InvalidArgument when a task has an empty role or a negative index.
absl::Status ValidateTask(uint64_t job_id, const v1::TaskRecord& task);

// Returns InvalidArgument when a node record has no name.
absl::Status ValidateNode(const v1::NodeRecord& node);

// The error for a batch naming a job that does not exist.
absl::Status JobNotFound(uint64_t job_id, const char* op);

// Returns true when a task holds resources on its node: it has a node, is not
// in a terminal state, and its job is not terminal.
bool TaskIsLive(v1::JobState job_state, const v1::TaskRecord& task);

// Returns one line per GPU or port held by two live tasks of one node, e.g.
// "node n1: GPU 3 held by job 7 worker/0 and job 9 ps/1". `jobs` carry their
// tasks.
std::vector<std::string> FindAllocationConflicts(const std::vector<v1::JobRecord>& jobs);

// Returns OK when `problems` is empty, else DataLoss listing them (at most 20,
// then a count).
absl::Status ProblemsToStatus(const std::string& what, const std::vector<std::string>& problems);

}  // namespace trainyard::store_checks
