// How the example's workers line up between epochs: through the job
// master's barrier when the task has TRAINYARD_JOB_MASTER, not at all
// otherwise (each worker then trains at its own pace).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace trainyard::examples {

class EpochSync {
 public:
  virtual ~EpochSync() = default;
  // Registers the worker and marks it RUNNING.
  virtual absl::Status Start() = 0;
  // Waits until every worker reached this point; `what` names it in errors.
  virtual absl::Status Barrier(const std::string& what) = 0;
  // Marks the worker COMPLETED.
  virtual absl::Status Complete() = 0;
};

// No job master: every call succeeds at once.
std::unique_ptr<EpochSync> MakeNoSync();

// The job master at TRAINYARD_JOB_MASTER (worker identity from the task's
// environment). A barrier that fails because another worker is being
// restarted (ABORTED) or the master is away (UNAVAILABLE) is retried until
// `barrier_timeout` passes.
std::unique_ptr<EpochSync> MakeJobMasterSync(absl::Duration barrier_timeout);

}  // namespace trainyard::examples
