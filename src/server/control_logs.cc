// ControlState: where a job's tasks keep their logs, for the log hub.
#include "absl/strings/str_cat.h"
#include "server/control_state.h"
#include "server/control_state_internal.h"

namespace trainyard::server {

absl::StatusOr<JobLogPlaces> ControlState::LogPlaces(const std::string& name) const {
  const JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  JobLogPlaces places;
  places.job_done = api::IsTerminal(job->rec.state());
  for (const v1::TaskRecord& t : job->rec.tasks()) {
    places.tasks.push_back(TaskLogPlace{.role = t.role(),
                                        .index = t.index(),
                                        .node = t.node(),
                                        .attempt = t.attempt(),
                                        .launch_attempt = t.launch_attempt(),
                                        .done = api::IsTerminal(t.state())});
  }
  return places;
}

}  // namespace trainyard::server
