// WorkerController: what a training program asks of its job: who it is, who
// the other workers are (now, or once all joined) and barriers. The
// JobMasterClient-backed implementation is the one tasks use; code that
// depends only on this interface can be tested with a fake.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobmaster/client/job_master_client.h"

namespace trainyard::jobmaster {

class WorkerController {
 public:
  virtual ~WorkerController() = default;
  // This worker's WorkerInfo, with the id the master gave it.
  virtual pb::WorkerInfo GetWorkerInfo() const = 0;
  // The job's number of workers.
  virtual int NumberOfWorkers() const = 0;
  // The workers that joined so far (including those that left), by id.
  virtual absl::StatusOr<std::vector<pb::WorkerStatus>> GetJoinedWorkers() = 0;
  // All workers of the job, once every one joined; DEADLINE_EXCEEDED after
  // `timeout` naming the missing ones.
  virtual absl::StatusOr<std::vector<pb::WorkerStatus>> GetAllWorkers(absl::Duration timeout) = 0;
  // Returns once every worker reached the barrier; see
  // JobMasterClient::WaitOnBarrier for the errors.
  virtual absl::Status WaitOnBarrier(absl::Duration timeout) = 0;
};
using WorkerControllerPtr = std::unique_ptr<WorkerController>;

// A WorkerController over a JobMasterClient. REQUIRES: `client` outlives it.
class JobMasterWorkerController : public WorkerController {
 public:
  explicit JobMasterWorkerController(JobMasterClient* client) : client_(client) {}
  pb::WorkerInfo GetWorkerInfo() const override { return client_->info(); }
  int NumberOfWorkers() const override { return client_->num_workers(); }
  absl::StatusOr<std::vector<pb::WorkerStatus>> GetJoinedWorkers() override;
  absl::StatusOr<std::vector<pb::WorkerStatus>> GetAllWorkers(absl::Duration timeout) override;
  absl::Status WaitOnBarrier(absl::Duration timeout) override {
    return client_->WaitOnBarrier(timeout);
  }

 private:
  JobMasterClient* client_;
};

}  // namespace trainyard::jobmaster
