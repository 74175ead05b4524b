// JobManager: what the log hub asks of the shell — where a job's tasks are,
// a way to message a node's agent — and the hub told of every job change.
#include "server/job_manager.h"

namespace trainyard::server {

void JobManager::SetLogHub(LogHub* hub) {
  absl::MutexLock lock(&mu_);
  // Every change of a job reaches the persister; the hub hears of it there
  // (under this lock: OnJobChanged only takes the hub's own).
  Persister::JobObserver observer;
  if (hub) observer = [hub](const std::string& job) { hub->OnJobChanged(job); };
  control_.persister().SetJobObserver(std::move(observer));
}

absl::StatusOr<JobLogPlaces> JobManager::LogPlaces(const std::string& job) {
  absl::MutexLock lock(&mu_);
  return control_.LogPlaces(job);
}

bool JobManager::SendToNode(const std::string& node, v1::ServerMessage msg) {
  absl::MutexLock lock(&mu_);
  return streams_.Send(node, std::move(msg));
}

}  // namespace trainyard::server
