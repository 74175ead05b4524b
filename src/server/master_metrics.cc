// The job masters' summed figures (see master_metrics.h).
#include "server/master_metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainyard::server {

absl::Status ValidateJobMasterSummary(const v1::JobMasterSummary& s) {
  if (s.job().empty()) return absl::InvalidArgumentError("job: must be set");
  if (s.workers_by_state_size() > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers_by_state: ", s.workers_by_state_size(), " entries; there are 5 worker states"));
  }
  for (int32_t n : s.workers_by_state()) {
    if (n < 0) return absl::InvalidArgumentError("workers_by_state: a count is negative");
  }
  if (s.connections() < 0) return absl::InvalidArgumentError("connections: negative");
  Histogram ours = LatencyHistogram();
  bool same = s.barrier_bounds_seconds_size() == ours.buckets();
  for (int i = 0; same && i < ours.buckets(); ++i) same = s.barrier_bounds_seconds(i) == ours.bound(i);
  if (!same) {
    return absl::InvalidArgumentError(
        "barrier_bounds_seconds: not the server's latency buckets (0.0005 .. 10 s); master and server versions differ");
  }
  if (s.barrier_buckets_size() != ours.buckets() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier_buckets: ", s.barrier_buckets_size(), " entries, not ", ours.buckets() + 1));
  }
  for (int64_t n : s.barrier_buckets()) {
    if (n < 0) return absl::InvalidArgumentError("barrier_buckets: a count is negative");
  }
  if (!std::isfinite(s.barrier_seconds_sum()) || s.barrier_seconds_sum() < 0) {
    return absl::InvalidArgumentError("barrier_seconds_sum: not a finite number >= 0");
  }
  return absl::OkStatus();
}

absl::Status JobMasterMetrics::Report(const v1::JobMasterSummary& s, absl::Time now) {
  if (absl::Status valid = ValidateJobMasterSummary(s); !valid.ok()) return valid;
  Master m;
  for (int i = 0; i < s.workers_by_state_size(); ++i) m.workers[i] = s.workers_by_state(i);
  m.connections = s.connections();
  for (int i = 0; i < s.barrier_buckets_size(); ++i) m.barrier_seconds.AddToBucket(i, s.barrier_buckets(i));
  m.barrier_seconds.AddSum(s.barrier_seconds_sum());
  m.heard = now;
  auto key = std::make_pair(s.job(), s.master_address());
  absl::MutexLock lock(&mu_);
  RetireSilent(now);
  auto it = masters_.find(key);
  if (it == masters_.end() && masters_.size() >= kMaxMasters) {
    return absl::ResourceExhaustedError(absl::StrCat("the server keeps the figures of ", kMaxMasters,
                                                     " job masters at most; try again later"));
  }
  // A master that started again at the same address counts from zero: what
  // its earlier life observed stays in the sum.
  if (it != masters_.end() && m.barrier_seconds.count() < it->second.barrier_seconds.count()) {
    retired_.Merge(it->second.barrier_seconds);
  }
  if (s.final()) {
    retired_.Merge(m.barrier_seconds);
    if (it != masters_.end()) masters_.erase(it);
    return absl::OkStatus();
  }
  masters_[key] = m;
  return absl::OkStatus();
}

void JobMasterMetrics::RetireSilent(absl::Time now) {
  for (auto it = masters_.begin(); it != masters_.end();) {
    if (now - it->second.heard < kForget) {
      ++it;
      continue;
    }
    retired_.Merge(it->second.barrier_seconds);
    it = masters_.erase(it);
  }
}

JobMasterTotals JobMasterMetrics::Totals(absl::Time now) {
  JobMasterTotals t;
  absl::MutexLock lock(&mu_);
  RetireSilent(now);
  t.barrier_seconds = retired_;
  for (const auto& [key, m] : masters_) {
    t.barrier_seconds.Merge(m.barrier_seconds);
    if (now - m.heard >= kStale) continue;
    ++t.reporting;
    for (size_t i = 0; i < m.workers.size(); ++i) t.workers[i] += m.workers[i];
    t.connections += m.connections;
  }
  return t;
}

}  // namespace trainyard::server
