// Job arrays, dependencies and hold: the rules of `trainyard submit --array
// / --after-ok / --after-any / --hold` and of their spec fields (hold,
// dependencies, array), in one place for the CLI, the server and the docs.
// An array is one job per index, named ARRAY-INDEX; Slurm's syntax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace trainyard::api {

// The most elements one array may have, and the highest index.
inline constexpr int kMaxArrayElements = 1000;
inline constexpr int kMaxArrayIndex = 999999;
// The longest array text taken: checked before anything is parsed, so one
// request cannot make the parser loop (a range repeated many times).
inline constexpr size_t kMaxArrayTextBytes = 256;
// The most one array's records may weigh together (spec bytes x elements).
inline constexpr int64_t kMaxArrayTotalBytes = int64_t{64} << 20;

struct ArrayRange {
  std::vector<int> indices;  // ascending, no duplicates
  int throttle = 0;          // %N: at most N elements placed at once; 0 = no limit
};

// Parses Slurm's array syntax: "0-99", "1,3,5-7", "0-15:4" (a step), each
// optionally followed by "%N". Errors (InvalidArgument, "array: ..."): an
// empty or malformed list, a range that runs backwards, an index above
// kMaxArrayIndex, more than kMaxArrayElements elements, %0, a text longer
// than kMaxArrayTextBytes.
absl::StatusOr<ArrayRange> ParseArrayRange(absl::string_view text);

// The name of element `index` of array `array`: "train-3".
std::string ArrayElementName(const std::string& array, int index);

// Pending reasons, as `jobs` and `describe` show them.
std::string HeldReason(const std::string& job);                          // "held (trainyard release JOB)"
std::string WaitingForReason(const std::string& dep, bool after_ok);     // "waiting for job X (after-ok)"
std::string DependencyFailedMessage(const std::string& dep, absl::string_view how);  // "dependency X ended FAILED"
std::string ThrottleReason(const std::string& array, int throttle);

}  // namespace trainyard::api
