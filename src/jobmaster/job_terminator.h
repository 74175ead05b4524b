// How a job master ends its job. The master decides the outcome (all workers
// COMPLETED → SUCCEEDED; a worker in ERROR beyond its restart budget →
// FAILED) and hands it to a JobTerminator. The terminator that tells the
// server arrives with the server's job-master API; until then the CLI uses
// StreamJobTerminator, and tests use FakeJobTerminator.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace trainyard::jobmaster {

enum class JobOutcome { kSucceeded, kFailed };

// "SUCCEEDED" / "FAILED".
const char* JobOutcomeName(JobOutcome outcome);

struct JobEnd {
  std::string job;
  JobOutcome outcome = JobOutcome::kSucceeded;
  std::string reason;  // e.g. "all 3 workers COMPLETED", "worker 2 ERROR: ..."
};

// A worker the master put in ERROR (it reported ERROR, or missed its pings).
struct WorkerFailure {
  std::string job;
  int worker_id = 0;
  int attempt = 0;     // the attempt it registered with (TRAINYARD_ATTEMPT)
  std::string reason;  // "no ping for 5.2s (5 missed pings ...)"
};

// The answer to an order to checkpoint: every worker that checkpoints saved
// (`saved`, `step` the lowest step they saved), or none of the job's
// workers checkpoints (`saved` false).
struct CheckpointResult {
  std::string job;
  int64_t order_id = 0;
  bool saved = false;
  int64_t step = 0;
  int workers = 0;
};

// Told once per job, on the master's event loop: it must return quickly
// (hand slow work to another thread).
class JobTerminator {
 public:
  virtual ~JobTerminator() = default;
  virtual void Terminate(const JobEnd& end) = 0;
  // A worker failed. Returns true when someone else decides what follows —
  // the server, which stops that attempt and applies the task's restart
  // policy and budget — and false when the master must: it then ends the
  // job FAILED once the worker has used its max_restarts (a master with no
  // server). Called on the event loop, like Terminate.
  virtual bool WorkerFailed(const WorkerFailure& /*failure*/) { return false; }
  // The job's workers answered an order to checkpoint (once per order). On
  // the event loop, like Terminate.
  virtual void Checkpointed(const CheckpointResult& /*result*/) {}
};
using JobTerminatorPtr = std::unique_ptr<JobTerminator>;

// Writes "job NAME OUTCOME: reason" to a stream (stdout for the CLI) and,
// when a path is given, the same line to that file.
class StreamJobTerminator : public JobTerminator {
 public:
  // REQUIRES: `out` outlives the terminator.
  StreamJobTerminator(std::ostream* out, std::string outcome_file);
  void Terminate(const JobEnd& end) override;

 private:
  std::ostream* out_;
  std::string outcome_file_;
};

// Records the outcome for tests; thread-safe.
class FakeJobTerminator : public JobTerminator {
 public:
  void Terminate(const JobEnd& end) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    end_ = end;
    cv_.SignalAll();
  }
  // Waits up to `timeout` (a std::chrono duration) of real time for the job
  // to end; returns the end if it did.
  template <typename Duration>
  std::optional<JobEnd> WaitForEnd(Duration timeout) {
    absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
    absl::MutexLock lock(&mu_);
    while (!end_.has_value() && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    return end_;
  }
  std::optional<JobEnd> end() const {
    absl::MutexLock lock(&mu_);
    return end_;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  void Checkpointed(const CheckpointResult& result) override {
    absl::MutexLock lock(&mu_);
    checkpoints_.push_back(result);
  }
  std::vector<CheckpointResult> checkpoints() const {
    absl::MutexLock lock(&mu_);
    return checkpoints_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::optional<JobEnd> end_ ABSL_GUARDED_BY(mu_);
  std::vector<CheckpointResult> checkpoints_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace trainyard::jobmaster
