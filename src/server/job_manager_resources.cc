// JobManager: the running tasks' resource samples, which go past the
// control state straight into the view store's ResourceBook (they are a
// view of the nodes, not state: nothing is decided by them and nothing of
// them is durable).
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/job_manager.h"

namespace trainyard::server {

void JobManager::OnTaskResources(const std::string& node, const v1::TaskResourceReport& report) {
  ResourceBook& book = views_.resources();
  absl::Time now = clock_->Now();
  // Where the views place each task of the jobs in the report: an agent
  // speaks for its own tasks only.
  std::string job_name;
  std::shared_ptr<const v1::JobView> view;
  std::map<std::pair<std::string, int>, const v1::TaskView*> tasks;
  for (const v1::TaskResources& t : report.tasks()) {
    if (!view || t.job() != job_name) {
      job_name = t.job();
      std::optional<ViewStore::JobEntry> entry = views_.Job(job_name);
      view = entry ? entry->view : nullptr;
      tasks.clear();
      if (view) {
        for (const v1::TaskView& tv : view->tasks()) tasks[{tv.role(), tv.index()}] = &tv;
      }
    }
    if (!view || t.job_id() == 0 || view->id() != t.job_id()) continue;
    auto it = tasks.find({t.role(), t.index()});
    if (it == tasks.end() || it->second->node() != node) continue;
    book.Record(node, t, now);
  }
}

absl::StatusOr<v1::JobResourcesResponse> JobManager::JobResources(const v1::JobResourcesRequest& req) {
  PublishAllRecovered();
  std::optional<ViewStore::JobEntry> entry = views_.Job(req.job());
  if (!entry) return absl::NotFoundError(absl::StrCat("job ", req.job(), " not found"));
  absl::Time since = absl::FromUnixMillis(req.since_unix_ms());
  return BuildJobResources(*entry->view, views_.resources().Job(entry->view->id(), since),
                           config_.task_sample_interval_ms);
}

}  // namespace trainyard::server
