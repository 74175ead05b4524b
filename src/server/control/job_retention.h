// JobRetention: how long the records of ended jobs stay, and where.
// - A finished job stays in the live views for finishedJobRetentionMinutes
//   after its end, then leaves them as a delete takes it: its record renamed
//   NAME#ID in the store, its name free once that rename is durable.
// - A deleted job is held here (its record, for the write that renames it)
//   until that write succeeds; from then on the store keeps its record for
//   accounting, until accountingRetentionDays after its end, when it is
//   purged.
// The control state does the deleting (ControlState::DeleteJob) and the
// writing; this keeps the jobs in the order they come due and says which
// are due. Checked at most once a minute, a few dozen records a turn at
// most (an etcd transaction holds 128 keys by default; a purge is 3).
// Part of the control state: single-threaded, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::server {

struct JobRt;  // job_rt.h

class JobRetention {
 public:
  // 0 or less: finished jobs stay in the live views until deleted.
  JobRetention(int finished_retention_minutes, int accounting_retention_days);
  ~JobRetention();

  // A job ended (or was recovered ended) and shows in the live views.
  void Finished(const v1::JobRecord& rec);
  // A deleted job's record (renamed NAME#ID) is durable in the store.
  void Stored(const v1::JobRecord& rec);

  // Whether a turn of expiry is due (at most once a minute, sooner while
  // more was due than a turn took: MoreDue).
  bool Due(absl::Time now) const { return now >= next_turn_; }
  // A turn begins at `now`: the next is a minute away.
  void TurnTaken(absl::Time now) { next_turn_ = now + absl::Minutes(1); }
  // The finished job past the retention that ended first, as (end ms, name),
  // taken; nullopt when none is.
  std::optional<std::pair<int64_t, std::string>> NextExpired(absl::Time now);
  // A job NextExpired gave that could not be deleted yet (its tasks are
  // still stopping): it comes due again.
  void PutBack(int64_t end_ms, std::string name) { finished_.emplace(end_ms, std::move(name)); }
  // The job `name` expired and was deleted, its record kept as `kept_as`:
  // its name is free once that rename is durable (Written).
  void Expired(const std::string& kept_as, const std::string& name) { expired_names_[kept_as] = name; }
  // The ids of deleted jobs past the accounting retention, to purge from the
  // store, at most `max` of them.
  std::vector<uint64_t> TakePurges(absl::Time now, int max);
  // A purge's write failed: it is asked again at the next turn.
  void PurgeFailed(uint64_t id) { stored_.emplace(0, id); }
  // More was due than the turn took: the next round goes on.
  void MoreDue(absl::Time now) { next_turn_ = now; }

  // A deleted job, held under the name its record is kept under until the
  // write that renames it succeeds (Written).
  void HoldDeleted(const std::string& kept_as, std::unique_ptr<JobRt> job);
  const JobRt* Deleted(const std::string& kept_as) const;
  // The write of `kept_as`'s record succeeded: a deleted job held is let go
  // (its record is in the store, purged past the retention); returns the
  // name an expired job ended under, now free.
  std::optional<std::string> Written(const std::string& kept_as);

 private:
  const absl::Duration finished_retention_;
  const absl::Duration accounting_retention_;
  absl::Time next_turn_ = absl::InfinitePast();
  // Finished jobs in the live views, by end time (ms).
  std::multimap<int64_t, std::string> finished_;
  // Deleted jobs' records in the store, by end time (ms) -> id.
  std::multimap<int64_t, uint64_t> stored_;
  // Expired jobs by the name their record is kept under -> the name freed.
  absl::flat_hash_map<std::string, std::string> expired_names_;
  std::map<std::string, std::unique_ptr<JobRt>> deleted_;
};

}  // namespace trainyard::server
