// The write-behind journal (see persister.h).
#include "server/control/persister.h"

#include <variant>

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
  raw_in_flight_ = RawWrites();
  for (const WriteBatch::Op& op : w.batch.ops()) {
    if (const auto* p = std::get_if<WriteBatch::PurgeJobOp>(&op)) raw_in_flight_.purges.push_back(p->id);
    if (const auto* m = std::get_if<WriteBatch::PutMetaOp>(&op)) raw_in_flight_.meta_keys.push_back(m->key);
    if (const auto* m = std::get_if<WriteBatch::DeleteMetaOp>(&op)) raw_in_flight_.meta_keys.push_back(m->key);
  }
  w.seq = ++seq_sent_;
  return w;
}

Persister::RawWrites Persister::Done(uint64_t write_seq, const std::vector<std::string>& jobs,
                                     const std::vector<std::string>& nodes, const absl::Status& status,
                                     bool stopping) {
  in_flight_ = false;
  seq_done_ = write_seq;
  RawWrites raw = std::move(raw_in_flight_);
  raw_in_flight_ = RawWrites();
  if (status.ok()) {
    if (!error_.ok()) Log(LogLevel::kInfo, "server", "store writes succeed again");
    error_ = absl::OkStatus();
    return RawWrites();
  }
  if (error_.ok()) {
    Log(LogLevel::kError, "server", "store write failed: %s; the jobs it held are written again on the next try",
        std::string(status.message()));
  }
  error_ = status;
  failed_.insert(write_seq);
  while (failed_.size() > 1024) failed_.erase(failed_.begin());
  if (!stopping) {
    dirty_jobs_.insert(jobs.begin(), jobs.end());
    dirty_nodes_.insert(nodes.begin(), nodes.end());
  }
  return raw;
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
