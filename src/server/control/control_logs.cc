// ControlState: where a job's tasks keep their logs, for the log hub: each
// task's launches (which node ran which attempts) and the state of those
// nodes, so an attempt is read where it ran, not where the task is now.
#include "absl/strings/str_cat.h"
#include "server/control/control_state.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
namespace {

// Enough for every move and requeue a task goes through in practice; the
// oldest launches' logs become unreachable past it (the hub says so).
constexpr int kMaxLaunches = 100;

}  // namespace

void RecordLaunch(v1::TaskRecord& t) {
  t.set_launch_attempt(t.attempt());
  int n = t.launches_size();
  if (n > 0 && t.launches(n - 1).attempt() == t.attempt() && t.launches(n - 1).node() == t.node()) return;
  // A launch at the same attempt elsewhere (the first never started) replaces it.
  if (n > 0 && t.launches(n - 1).attempt() >= t.attempt()) t.mutable_launches()->RemoveLast();
  v1::TaskLaunch* l = t.add_launches();
  l->set_attempt(t.attempt());
  l->set_node(t.node());
  if (t.launches_size() > kMaxLaunches) t.mutable_launches()->DeleteSubrange(0, t.launches_size() - kMaxLaunches);
}

absl::StatusOr<JobLogPlaces> ControlState::LogPlaces(const std::string& name) const {
  const JobRt* job = FindJob(name);
  if (!job) return absl::NotFoundError(absl::StrCat("job '", name, "' does not exist"));
  JobLogPlaces places;
  places.job_id = job->rec.id();
  places.job_done = api::IsTerminal(job->rec.state());
  places.job_state = job->rec.state();
  places.pending_reason = job->rec.pending_reason();
  for (const v1::TaskRecord& t : job->rec.tasks()) {
    TaskLogPlace p{.role = t.role(),
                   .index = t.index(),
                   .node = t.node(),
                   .attempt = t.attempt(),
                   .launch_attempt = t.launch_attempt(),
                   .done = api::IsTerminal(t.state())};
    for (const v1::TaskLaunch& l : t.launches()) {
      p.launches.push_back({l.attempt(), l.node()});
      if (const NodeRt* node = FindNode(l.node())) places.node_states[l.node()] = v1::NodeState_Name(node->state).substr(5);
    }
    places.tasks.push_back(std::move(p));
  }
  return places;
}

}  // namespace trainyard::server
