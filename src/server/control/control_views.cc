// ControlState: what clients see — jobs with their tasks and events, nodes
// with their free resources (both built by the ViewPublisher), queues with
// their use.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "api/convert.h"
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

void ControlState::SetStoredEvents(const std::string& name, const std::vector<v1::JobEventRecord>& stored) {
  JobRt* job = FindJob(name);
  if (!job || job->events_loaded) return;
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
  publisher_.JobChanged(name);
}

void ControlState::PublishNodesAndQueues(ViewStore* views, absl::Time now) {
  if (publisher_.PublishNodes(views, now)) views->PutQueues(std::make_shared<const v1::ListQueuesResponse>(ListQueues()));
}

std::vector<v1::JobView> ControlState::ListJobs(bool include_finished) const {
  std::vector<v1::JobView> out;
  for (auto& [name, job] : jobs_) {
    if (!job || (!include_finished && api::IsTerminal(job->rec.state()))) continue;
    out.push_back(publisher_.View(*job, false));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id() < b.id(); });
  return out;
}

std::vector<v1::NodeView> ControlState::ListNodes() const {
  std::vector<v1::NodeView> out;
  for (auto& [name, node] : nodes_) out.push_back(publisher_.NodeViewOf(*node, /*with_heartbeat=*/true));
  return out;
}

std::optional<v1::NodeView> ControlState::NodeViewOf(const std::string& name) const {
  const NodeRt* n = FindNode(name);
  if (!n) return std::nullopt;
  return publisher_.NodeViewOf(*n, /*with_heartbeat=*/true);
}

v1::ListQueuesResponse ControlState::ListQueues() const {
  v1::ListQueuesResponse resp;
  const core::ClusterState& cs = scheduler_->state();
  *resp.mutable_cluster() = api::ToProto(cs.ClusterCapacity());
  std::vector<std::pair<const core::QueueConfig*, double>> stack = {{&scheduler_->options().queues.root, 100.0}};
  while (!stack.empty()) {
    auto [q, parent_abs] = stack.back();
    stack.pop_back();
    double abs_cap = parent_abs * q->capacity_percent / 100.0;
    double abs_max = parent_abs * q->max_capacity_percent / 100.0;
    for (const auto& c : q->children) stack.push_back({&c, abs_cap});
    if (!q->children.empty()) continue;
    v1::QueueView* v = resp.add_queues();
    v->set_name(q->name);
    v->set_capacity_percent(abs_cap);
    v->set_max_capacity_percent(abs_max);
    v->set_weight(q->weight);
    v->set_max_time_ms(absl::ToInt64Milliseconds(q->max_time));
    v->set_default_time_ms(absl::ToInt64Milliseconds(q->default_time));
    const auto& names = cs.queue_names();
    auto it = std::find(names.begin(), names.end(), q->name);
    if (it != names.end()) {
      auto queue = static_cast<int32_t>(it - names.begin());
      *v->mutable_used() = api::ToProto(cs.QueueUsed(queue));
      v->mutable_used()->set_gpu_milli(int64_t{1000} * v->used().gpus() + cs.QueueShareMilli(queue));
    }
    if (const JobCounts::Queue* counted = counts_.queue(q->name)) {
      v->set_running_jobs(counted->running);
      v->set_pending_jobs(counted->pending);
    }
  }
  std::sort(resp.mutable_queues()->begin(), resp.mutable_queues()->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return resp;
}

}  // namespace trainyard::server
