// JobMasterWorkerController: the WorkerController that asks the job master.
#include "jobmaster/client/worker_controller.h"

namespace trainyard::jobmaster {
namespace {

// Wait of an IMMEDIATE list: answered at once unless the master is away.
constexpr absl::Duration kImmediateWait = absl::Seconds(10);

std::vector<pb::WorkerStatus> Workers(pb::ListWorkersReply reply) {
  return std::vector<pb::WorkerStatus>(std::make_move_iterator(reply.mutable_workers()->begin()),
                                       std::make_move_iterator(reply.mutable_workers()->end()));
}

}  // namespace

absl::StatusOr<std::vector<pb::WorkerStatus>> JobMasterWorkerController::GetJoinedWorkers() {
  absl::StatusOr<pb::ListWorkersReply> reply = client_->ListWorkers(pb::IMMEDIATE, kImmediateWait);
  if (!reply.ok()) return reply.status();
  return Workers(*std::move(reply));
}

absl::StatusOr<std::vector<pb::WorkerStatus>> JobMasterWorkerController::GetAllWorkers(
    absl::Duration timeout) {
  absl::StatusOr<pb::ListWorkersReply> reply =
      client_->ListWorkers(pb::RESPONSE_AFTER_ALL_JOINED, timeout);
  if (!reply.ok()) return reply.status();
  return Workers(*std::move(reply));
}

}  // namespace trainyard::jobmaster
