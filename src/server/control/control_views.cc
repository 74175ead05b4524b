// ControlState: what clients ask of one job or node (the ViewPublisher
// builds every view, view_publisher.h) and where a job's logs are.
#include "absl/strings/str_cat.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

absl::StatusOr<v1::JobView> ControlState::Describe(const std::string& name) const {
  const JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  return publisher_.View(*job, /*with_events=*/true);
}

std::optional<ControlState::EventsState> ControlState::JobEventsState(const std::string& name) const {
  const JobRt* job = FindJob(name);
  if (!job) return std::nullopt;
  return EventsState{job->rec.id(), job->events_loaded};
}

std::optional<v1::NodeView> ControlState::NodeViewOf(const std::string& name) const {
  const NodeRt* n = FindNode(name);
  if (!n) return std::nullopt;
  return publisher_.NodeViewOf(*n, /*with_heartbeat=*/true);
}

absl::StatusOr<JobLogPlaces> ControlState::LogPlaces(const std::string& name) const {
  const JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  return LogPlacesOf(*job, nodes_);
}

void ControlState::SetStoredEvents(const std::string& name, const std::vector<v1::JobEventRecord>& stored) {
  JobRt* job = FindJob(name);
  if (!job || job->events_loaded) return;
  LoadStoredEvents(job, stored);
  publisher_.JobChanged(name);
}

}  // namespace trainyard::server
