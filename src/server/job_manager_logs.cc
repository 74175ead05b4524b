// JobManager: what the log hub and the exec relay ask of the shell — where a
// job's tasks are, their orders through the backend — and the hub told of
// every job change.
#include "server/job_manager.h"

namespace trainyard::server {

void JobManager::SetLogHub(LogHub* hub) {
  Turn turn(this);
  // Every change of a job reaches the persister; the hub hears of it there
  // (under this lock: OnJobChanged only takes the hub's own).
  Persister::JobObserver observer;
  if (hub) observer = [hub](const std::string& job) { hub->OnJobChanged(job); };
  control_.persister().SetJobObserver(std::move(observer));
}

absl::StatusOr<JobLogPlaces> JobManager::LogPlaces(const std::string& job) {
  Turn turn(this);
  return control_.LogPlaces(job);
}

bool JobManager::ReadLog(const std::string& node, v1::LogRead read) {
  Turn turn(this);
  return contract_.ReadLog(node, std::move(read));
}

bool JobManager::AckLog(const std::string& node, v1::LogAck ack) {
  Turn turn(this);
  return contract_.AckLog(node, std::move(ack));
}

bool JobManager::CancelLog(const std::string& node, v1::LogCancel cancel) {
  Turn turn(this);
  return contract_.CancelLog(node, std::move(cancel));
}

bool JobManager::OpenExec(const std::string& node, v1::ExecOpen open) {
  Turn turn(this);
  return contract_.OpenExec(node, std::move(open));
}

bool JobManager::ExecInput(const std::string& node, v1::ExecInput input) {
  Turn turn(this);
  return contract_.ExecInput(node, std::move(input));
}

}  // namespace trainyard::server
