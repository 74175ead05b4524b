// The published views (see view_store.h).
#include "server/view_store.h"

#include <algorithm>

#include "api/states.h"

namespace trainyard::server {

void ViewStore::PutJob(const std::string& name, JobEntry entry) {
  entry.task_states = {};
  for (const auto& t : entry.view->tasks()) {
    if (t.state() >= 0 && t.state() < v1::TaskState_ARRAYSIZE) ++entry.task_states[t.state()];
  }
  {
    absl::MutexLock lock(&mu_);
    Slot& slot = jobs_[name];
    // The old view leaves the counts and the new one enters them; most puts
    // keep the queue, and with it the cell.
    if (slot.entry.view) Count(slot.entry, slot.counted, -1);
    if (!slot.counted || slot.entry.view->queue() != entry.view->queue()) slot.counted = QueueCell(entry.view->queue());
    Count(entry, slot.counted, +1);
    // The job keeps its place in the live index while it stays live (the
    // same job: same id); otherwise the view it replaces leaves the index.
    const std::shared_ptr<const v1::JobView>& view = entry.view;
    bool live = !api::IsTerminal(view->state());
    if (live && slot.listed && slot.live->second == slot.entry.view && slot.live->first == view->id()) {
      slot.live->second = view;
    } else {
      Unlist(slot);
      if (live) List(slot, view);
    }
    std::swap(slot.entry, entry);
    Bump(&versions_.jobs);
  }
  // The view it replaced (now in `entry`) is freed here, outside the lock.
}

ViewStore::QueueCounts* ViewStore::QueueCell(const std::string& queue) {
  auto it = queue_counts_.find(queue);
  if (it == queue_counts_.end()) it = queue_counts_.emplace(queue, QueueCounts()).first;
  return &it->second;
}

void ViewStore::Count(const JobEntry& entry, QueueCounts* cell, int64_t sign) {
  int state = entry.view->state();
  if (state >= 0 && state < v1::JobState_ARRAYSIZE) {
    cell->jobs[state] += sign;
    cell->seen |= 1u << state;
  }
  for (int s = 0; s < v1::TaskState_ARRAYSIZE; ++s) task_counts_[s] += sign * entry.task_states[s];
}

void ViewStore::List(Slot& slot, const std::shared_ptr<const v1::JobView>& view) {
  auto [it, added] = live_.try_emplace(view->id(), view);
  if (!added) {
    // Another job's view of the same id: this one takes its place, and that
    // job's slot no longer points there.
    auto other = jobs_.find(it->second->name());
    if (other != jobs_.end() && other->second.listed && other->second.live == it) other->second.listed = false;
    it->second = view;
  }
  slot.live = it;
  slot.listed = true;
}

void ViewStore::Unlist(Slot& slot) {
  if (slot.listed && slot.live->second == slot.entry.view) live_.erase(slot.live);
  slot.listed = false;
}

void ViewStore::PutStats(StatsPtr stats) {
  absl::MutexLock lock(&mu_);
  stats_ = std::move(stats);
}

ViewStore::StatsPtr ViewStore::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

ViewStore::Counts ViewStore::StateCounts() const {
  Counts out;
  absl::MutexLock lock(&mu_);
  for (const auto& [queue, cell] : queue_counts_) {
    for (int s = 0; s < v1::JobState_ARRAYSIZE; ++s) {
      if (cell.seen & (1u << s)) out.jobs[{queue, static_cast<v1::JobState>(s)}] = cell.jobs[s];
    }
  }
  out.tasks = task_counts_;
  return out;
}

v1::JobView ViewStore::FullView(const JobEntry& entry) {
  v1::JobView v = *entry.view;
  entry.events.AppendTo(v.mutable_events());
  return v;
}

void ViewStore::RemoveJob(const std::string& name) {
  JobEntry gone;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(name);
    if (it == jobs_.end()) return;
    Unlist(it->second);
    std::swap(it->second.entry, gone);
    // A deleted job is no longer one the server knows: it leaves the counts.
    if (gone.view) Count(gone, it->second.counted, -1);
    jobs_.erase(it);
    Bump(&versions_.jobs);
  }
  // Freed here, outside the lock, as PutJob frees the view it replaces.
}

void ViewStore::PutNodes(NodesPtr nodes) {
  NodesPtr old = Nodes();
  // Views unchanged are shared with the last publication: compared by
  // pointer. The shell is the one publisher, so `old` is still the current.
  bool changed = old->size() != nodes->size();
  for (size_t i = 0; !changed && i < nodes->size(); ++i) changed = (*old)[i].view != (*nodes)[i].view;
  absl::MutexLock lock(&mu_);
  nodes_ = std::move(nodes);
  if (changed) Bump(&versions_.nodes);
}

void ViewStore::PutQueues(QueuesPtr queues) {
  absl::MutexLock lock(&mu_);
  queues_ = std::move(queues);
  Bump(&versions_.queues);
}

void ViewStore::PutSchedules(SchedulesPtr schedules) {
  absl::MutexLock lock(&mu_);
  schedules_ = std::move(schedules);
}

ViewStore::SchedulesPtr ViewStore::Schedules() const {
  absl::MutexLock lock(&mu_);
  return schedules_;
}

void ViewStore::Bump(int64_t* version) {
  ++*version;
  changed_.SignalAll();
}

ViewStore::Versions ViewStore::CurrentVersions() const {
  absl::MutexLock lock(&mu_);
  return versions_;
}

ViewStore::Versions ViewStore::AwaitChange(const Versions& seen, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (versions_ == seen) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return versions_;
}

std::optional<ViewStore::JobEntry> ViewStore::Job(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.entry;
}

std::optional<std::string> ViewStore::LiveJobUser(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(id);
  if (it == live_.end() || api::IsTerminal(it->second->state())) return std::nullopt;
  return it->second->user();
}

std::vector<std::shared_ptr<const v1::JobView>> ViewStore::Jobs(bool include_finished) const {
  std::vector<std::shared_ptr<const v1::JobView>> out;
  if (!include_finished) {
    absl::MutexLock lock(&mu_);
    out.reserve(live_.size());
    for (const auto& [id, view] : live_) out.push_back(view);
    return out;  // by id already
  }
  {
    absl::MutexLock lock(&mu_);
    out.reserve(jobs_.size());
    for (const auto& [name, slot] : jobs_) {
      if (include_finished || !api::IsTerminal(slot.entry.view->state())) out.push_back(slot.entry.view);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  return out;
}

v1::NodeView ViewStore::NodeEntry::Full() const {
  v1::NodeView v = *view;
  v.set_last_heartbeat_unix_ms(last_heartbeat_unix_ms);
  v.set_data_free_mb(data_free_mb);
  return v;
}

ViewStore::NodesPtr ViewStore::Nodes() const {
  absl::MutexLock lock(&mu_);
  return nodes_;
}

ViewStore::QueuesPtr ViewStore::Queues() const {
  absl::MutexLock lock(&mu_);
  return queues_;
}

}  // namespace trainyard::server
