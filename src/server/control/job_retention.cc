// How long the records of ended jobs stay (job_retention.h).
#include "server/control/job_retention.h"

#include "server/control/job_rt.h"

namespace trainyard::server {

JobRetention::JobRetention(int finished_retention_minutes, int accounting_retention_days)
    : finished_retention_(absl::Minutes(finished_retention_minutes)),
      accounting_retention_(absl::Hours(24) * accounting_retention_days) {}

JobRetention::~JobRetention() = default;

void JobRetention::Finished(const v1::JobRecord& rec) { finished_.emplace(EndOf(rec), rec.name()); }

void JobRetention::Stored(const v1::JobRecord& rec) { stored_.emplace(EndOf(rec), rec.id()); }

std::optional<std::pair<int64_t, std::string>> JobRetention::NextExpired(absl::Time now) {
  if (finished_retention_ <= absl::ZeroDuration() || finished_.empty() ||
      finished_.begin()->first >= ToMs(now - finished_retention_)) {
    return std::nullopt;
  }
  std::pair<int64_t, std::string> due = *finished_.begin();
  finished_.erase(finished_.begin());
  return due;
}

std::vector<uint64_t> JobRetention::TakePurges(absl::Time now, int max) {
  const int64_t before = ToMs(now - accounting_retention_);
  std::vector<uint64_t> out;
  while (static_cast<int>(out.size()) < max && !stored_.empty() && stored_.begin()->first < before) {
    out.push_back(stored_.begin()->second);
    stored_.erase(stored_.begin());
  }
  return out;
}

void JobRetention::HoldDeleted(const std::string& kept_as, std::unique_ptr<JobRt> job) {
  deleted_[kept_as] = std::move(job);
}

const JobRt* JobRetention::Deleted(const std::string& kept_as) const {
  auto it = deleted_.find(kept_as);
  return it == deleted_.end() ? nullptr : it->second.get();
}

std::optional<std::string> JobRetention::Written(const std::string& kept_as) {
  if (auto d = deleted_.find(kept_as); d != deleted_.end()) {
    // Purged from the store past the accounting retention; not before its
    // renamed record is there (a purge ahead of its rename in one write
    // would fail the write).
    Stored(d->second->rec);
    deleted_.erase(d);
  }
  auto e = expired_names_.find(kept_as);
  if (e == expired_names_.end()) return std::nullopt;
  std::string freed = std::move(e->second);
  expired_names_.erase(e);
  return freed;
}

}  // namespace trainyard::server
