// ControlState: schedules. The ScheduleDesk (schedule_desk.h) keeps them;
// the control state tells it whether a run has ended and ends the runs a
// new one replaces.
#include "absl/strings/str_cat.h"
#include "api/states.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {

bool ControlState::ScheduledJobLive(const std::string& name) const {
  if (const JobRt* job = FindJob(name)) return !api::IsTerminal(job->rec.state());
  // An array's run: live while an element is.
  for (const std::string& element : DependencyTargets(name)) {
    const JobRt* job = FindJob(element);
    if (job != nullptr && !api::IsTerminal(job->rec.state())) return true;
  }
  return false;
}

std::vector<ScheduleFire> ControlState::TakeDueSchedules(absl::Time now) {
  std::vector<ScheduleDesk::Replaced> replaced;
  std::vector<ScheduleFire> fires = schedules_.TakeDue(now, &replaced, &persister_.batch());
  for (const ScheduleDesk::Replaced& r : replaced) {
    std::vector<std::string> jobs = FindJob(r.run) ? std::vector<std::string>{r.run} : DependencyTargets(r.run);
    for (const std::string& j : jobs) {
      // NotFound only: a run deleted meanwhile has nothing left to end.
      (void)Kill(j, absl::StrCat("replaced by the next run of schedule ", r.schedule), now);
    }
  }
  return fires;
}

}  // namespace trainyard::server
