// AccountBook: every finished job's account (api::AccountOf) as the server
// last published it, kept after the job leaves the live views (deleted)
// for a retention period and up to a number of jobs: what `trainyard
// history` and `trainyard usage` (and their REST routes) read. The control
// state puts an account each time it publishes a finished job (its usage
// grows while its tasks stop) and when it deletes one; readers take the
// book's own lock a chunk of accounts at a time, never the shell's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/service.pb.h"

namespace trainyard::server {

class AccountBook {
 public:
  struct Limits {
    absl::Duration retention = absl::Hours(24 * 365);
    size_t max_jobs = 200000;
  };

  // How long and how many accounts are kept (max_jobs at least 1).
  void SetLimits(Limits limits) ABSL_LOCKS_EXCLUDED(mu_);
  // Puts a finished job's account, replacing the one of the same id. Past
  // max_jobs, the accounts that ended first leave, and so do those that
  // ended a retention period before this one did.
  void Put(v1::JobAccount account) ABSL_LOCKS_EXCLUDED(mu_);
  // Put, for each of them under one lock (a restart's recovered accounts).
  void PutMany(std::vector<v1::JobAccount> accounts) ABSL_LOCKS_EXCLUDED(mu_);

  // The finished jobs that match, oldest end first (newest first when the
  // request says so), one page at a time.
  // InvalidArgument names the field: a state that is not a finished one, a
  // negative page size, a token this book did not give, until before since.
  // Jobs that ended before the retention period (as of `now`) are left out.
  absl::StatusOr<v1::HistoryResponse> History(const v1::HistoryRequest& req, absl::Time now) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Usage per user or queue over the jobs that ended in the period.
  absl::StatusOr<v1::UsageResponse> Usage(const v1::UsageRequest& req, absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);

  // How many accounts are kept.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<int64_t, uint64_t>;  // (end time ms, id)
  void PutLocked(v1::JobAccount account) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first end time kept as of `now`.
  int64_t Oldest(absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Where a walk goes on from: at `key` (inclusive) or past it.
  struct Cursor {
    Key key;
    bool inclusive = false;
  };
  // Calls `visit` on the accounts of [lo, hi) by key, oldest first (or
  // newest first), from `at`, until it returns false: a chunk of them at a
  // time under the lock, visited outside it (a writer waits for one chunk's
  // copy, never a whole scan).
  void Walk(Key lo, Key hi, bool newest_first, Cursor at,
            const std::function<bool(const std::shared_ptr<const v1::JobAccount>&)>& visit) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void Erase(std::map<Key, std::shared_ptr<const v1::JobAccount>>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Limits limits_ ABSL_GUARDED_BY(mu_);
  std::map<Key, std::shared_ptr<const v1::JobAccount>> by_end_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, int64_t> end_of_ ABSL_GUARDED_BY(mu_);  // id -> end time ms
};

}  // namespace trainyard::server
