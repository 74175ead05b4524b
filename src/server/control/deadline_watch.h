// DeadlineWatch: the started jobs with a time limit (activeDeadline), ordered
// by when it runs out, so that a round looks only at the first, not at every
// job. The control state ends those past it as DEADLINE_EXCEEDED, their tasks
// stopped as a preemption stops them (StopWithGrace). Time is the round's
// `now`, not a timer thread. The deadline is the recorded start plus the
// limit (api::DeadlineMs), so a restarted server watches it again from the
// store. Part of the control state: single-threaded, no I/O.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::server {

class DeadlineWatch {
 public:
  // Watches the limit of a started job (`rec`: its record), or stops
  // watching it (its end). Both O(log jobs); a job without a limit, or one
  // that has ended, is not watched.
  void Watch(const v1::JobRecord& rec);
  void Unwatch(const v1::JobRecord& rec);
  // The jobs whose limit ran out by `now`, no longer watched. O(log jobs)
  // when none did.
  std::vector<std::string> TakeDue(absl::Time now);
  // The job's end message: "ran past its activeDeadline of 2m (started at
  // 2026-12-08T01:00:00Z)".
  static std::string Why(const v1::JobRecord& rec);

 private:
  std::set<std::pair<absl::Time, std::string>> deadlines_;
};

}  // namespace trainyard::server
