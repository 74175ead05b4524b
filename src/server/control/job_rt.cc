// The functions of one job's record (job_rt.h).
#include "server/control/job_rt.h"

#include <algorithm>
#include <utility>

#include "api/states.h"

namespace trainyard::server {

int64_t ToMs(absl::Time t) { return absl::ToUnixMillis(t); }

int64_t EndOf(const v1::JobRecord& rec) {
  return rec.end_time_ms() > 0 ? rec.end_time_ms() : rec.deleted_time_ms() > 0 ? rec.deleted_time_ms() : rec.submit_time_ms();
}

v1::JobEvent ToView(const v1::JobEventRecord& e) {
  v1::JobEvent v;
  v.set_time_unix_ms(e.time_ms());
  v.set_kind(e.kind());
  v.set_text(e.text());
  return v;
}

int FindTask(const JobRt& job, const std::string& role, int index) {
  if (auto it = job.role_start.find(role); it != job.role_start.end() && index >= 0) {
    int i = it->second + index;
    if (i < job.rec.tasks_size() && job.rec.tasks(i).role() == role && job.rec.tasks(i).index() == index) return i;
  }
  for (int i = 0; i < job.rec.tasks_size(); ++i) {
    if (job.rec.tasks(i).role() == role && job.rec.tasks(i).index() == index) return i;
  }
  return -1;
}

const v1::ReplicaSpec* ReplicaOf(const JobRt& job, int task) {
  const std::string& role = job.rec.tasks(task).role();
  for (const auto& r : job.rec.spec().replicas()) {
    if (r.role() == role) return &r;
  }
  return nullptr;
}

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

void LoadStoredEvents(JobRt* job, const std::vector<v1::JobEventRecord>& stored) {
  // Events written before a restart, then those since (which may already be
  // in the store too).
  std::vector<v1::JobEvent> stored_views;
  for (const auto& e : stored) stored_views.push_back(ToView(e));
  EventList all;
  for (const auto& e : stored_views) all = all.Append(e);
  job->events.ForEach([&](const v1::JobEvent& e) {
    bool dup = std::any_of(stored_views.begin(), stored_views.end(), [&](const v1::JobEvent& o) {
      return o.time_unix_ms() == e.time_unix_ms() && o.kind() == e.kind() && o.text() == e.text();
    });
    if (!dup) all = all.Append(e);
  });
  job->events = std::move(all);
  job->events_loaded = true;
}

JobLogPlaces LogPlacesOf(const JobRt& job, const NodeTable& nodes) {
  JobLogPlaces places;
  places.job_id = job.rec.id();
  places.job_done = api::IsTerminal(job.rec.state());
  places.job_state = job.rec.state();
  places.pending_reason = job.rec.pending_reason();
  for (const v1::TaskRecord& t : job.rec.tasks()) {
    TaskLogPlace p{.role = t.role(),
                   .index = t.index(),
                   .node = t.node(),
                   .attempt = t.attempt(),
                   .launch_attempt = t.launch_attempt(),
                   .done = api::IsTerminal(t.state())};
    for (const v1::TaskLaunch& l : t.launches()) {
      p.launches.push_back({l.attempt(), l.node()});
      if (const NodeRt* node = nodes.Find(l.node())) places.node_states[l.node()] = v1::NodeState_Name(node->state).substr(5);
    }
    places.tasks.push_back(std::move(p));
  }
  return places;
}

void LoadTaskState(JobRt& job) {
  const v1::JobRecord& rec = job.rec;
  job.task_rt.assign(rec.tasks_size(), TaskRt{});
  job.role_start.clear();
  for (int i = 0; i < rec.tasks_size(); ++i) job.role_start.emplace(rec.tasks(i).role(), i);  // the first of each
  for (int i = 0; i < rec.tasks_size(); ++i) {
    // The launch its agent runs (the agent's restarts raised `attempt`); a
    // task not placed waits for a launch at `attempt`.
    const v1::TaskRecord& t = rec.tasks(i);
    TaskRt& rt = job.task_rt[i];
    rt.launch_base = t.node().empty() ? t.attempt() : t.launch_attempt();
    // Running before a restart: its agent had it. A LAUNCHING one may never
    // have reached its agent.
    rt.acked = t.state() == v1::TASK_RUNNING || t.state() == v1::TASK_RESTARTING;
  }
}

}  // namespace trainyard::server
