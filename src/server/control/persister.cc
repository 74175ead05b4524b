// The write-behind journal (see persister.h).
#include "server/control/persister.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace trainyard::server {

std::optional<Persister::Write> Persister::Take(const RecordWriter& job, const RecordWriter& node) {
  if (in_flight_) return std::nullopt;
  Write w;
  w.jobs.assign(dirty_jobs_.begin(), dirty_jobs_.end());
  w.nodes.assign(dirty_nodes_.begin(), dirty_nodes_.end());
  dirty_jobs_.clear();
  dirty_nodes_.clear();
  for (const std::string& name : w.jobs) job(name, &batch_);
  for (const std::string& name : w.nodes) node(name, &batch_);
  if (batch_.empty()) return std::nullopt;
  std::swap(w.batch, batch_);
  in_flight_ = true;
  w.seq = ++seq_sent_;
  return w;
}

void Persister::Done(uint64_t write_seq, const std::vector<std::string>& jobs,
                     const std::vector<std::string>& nodes, const absl::Status& status, bool stopping) {
  in_flight_ = false;
  seq_done_ = write_seq;
  if (status.ok()) {
    if (!error_.ok()) Log(LogLevel::kInfo, "server", "store writes succeed again");
    error_ = absl::OkStatus();
    return;
  }
  if (error_.ok()) {
    Log(LogLevel::kError, "server", "store write failed: %s; the jobs it held are written again on the next try",
        std::string(status.message()));
  }
  error_ = status;
  failed_.insert(write_seq);
  while (failed_.size() > 1024) failed_.erase(failed_.begin());
  if (stopping) return;
  dirty_jobs_.insert(jobs.begin(), jobs.end());
  dirty_nodes_.insert(nodes.begin(), nodes.end());
}

std::optional<uint64_t> Persister::DurableTarget(uint64_t sent_before, bool pending_before) const {
  if (seq_sent_ > sent_before) return seq_sent_;        // the Take just now sent it
  if (pending_before) return seq_sent_ + 1;             // a write is in flight; it goes with the next
  if (in_flight_) return seq_sent_;                     // the write in flight may hold it
  return std::nullopt;                                  // nothing waits to be written
}

absl::Status Persister::ResultOf(uint64_t target) const {
  if (!failed_.count(target)) return absl::OkStatus();
  return error_.ok() ? absl::UnavailableError("the write failed") : error_;
}

}  // namespace trainyard::server
