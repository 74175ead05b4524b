// The job master's record of how many barriers its job has passed: one
// number in a file under the job's checkpoint directory, rewritten when a
// barrier completes, so that a master the agent restarts knows the count
// instead of believing whatever generation a worker presents.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainyard::jobmaster {

// Replaces the record at `path` with `passed` (written to a temporary file
// and renamed, so a reader sees the old count or the new one).
absl::Status WriteBarrierRecord(const std::string& path, int64_t passed);

// The count in the record at `path`: NotFound when there is none,
// InvalidArgument naming the path when it does not hold a count.
absl::StatusOr<int64_t> ReadBarrierRecord(const std::string& path);

}  // namespace trainyard::jobmaster
