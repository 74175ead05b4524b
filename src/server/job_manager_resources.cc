// JobManager: the running tasks' resource samples, which go past the
// control state straight into the view store's ResourceBook (they are a
// view of the nodes, not state: nothing is decided by them and nothing of
// them is durable).
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/job_manager.h"

namespace trainyard::server {

std::shared_ptr<const JobManager::TaskPlaces> JobManager::PlacesOf(const std::string& job) {
  std::optional<ViewStore::JobEntry> entry = views_.Job(job);
  if (!entry) return nullptr;
  absl::MutexLock lock(&places_mu_);
  auto it = places_.find(job);
  // Built again only when the job's view changed: a report per node per
  // interval must not walk a 10,000-task job each time.
  if (it != places_.end() && it->second->view == entry->view) return it->second;
  auto places = std::make_shared<TaskPlaces>();
  places->view = entry->view;
  for (const v1::TaskView& t : entry->view->tasks()) places->nodes[{t.role(), t.index()}] = t.node();
  // Bounded (jobs and their tasks); what is dropped is built again as
  // reports come.
  if (it != places_.end()) places_tasks_ -= it->second->nodes.size();
  if (places_.size() >= 4096 || places_tasks_ > 500000) {
    places_.clear();
    places_tasks_ = 0;
  }
  places_tasks_ += places->nodes.size();
  places_[job] = places;
  return places;
}

void JobManager::OnTaskResources(const std::string& node, const v1::TaskResourceReport& report) {
  // An agent speaks for its own tasks only: those the views place on it,
  // of the job of that id.
  std::vector<const v1::TaskResources*> kept;
  kept.reserve(static_cast<size_t>(report.tasks_size()));
  std::shared_ptr<const TaskPlaces> places;
  for (const v1::TaskResources& t : report.tasks()) {
    if (!places || places->view->name() != t.job()) places = PlacesOf(t.job());
    if (!places || t.job_id() == 0 || places->view->id() != t.job_id()) continue;
    auto it = places->nodes.find({t.role(), t.index()});
    if (it == places->nodes.end() || it->second != node) continue;
    kept.push_back(&t);
  }
  if (!kept.empty()) views_.resources().Record(node, kept, clock_->Now());
}

absl::StatusOr<v1::JobResourcesResponse> JobManager::JobResources(const v1::JobResourcesRequest& req) {
  PublishWaitingViews();
  std::optional<ViewStore::JobEntry> entry = views_.Job(req.job());
  if (!entry) return absl::NotFoundError(absl::StrCat("job ", req.job(), " not found"));
  absl::Time since = absl::FromUnixMillis(req.since_unix_ms());
  return BuildJobResources(*entry->view, views_.resources().Job(entry->view->id(), since, req.newest_only()),
                           config_.task_sample_interval_ms, req.newest_only());
}

}  // namespace trainyard::server
