// Persister: the server's write-behind journal to the StateStore, without
// the store or a lock. The control state marks what changed (jobs, nodes)
// and appends events; the shell takes one write at a time, hands it to the
// store and reports the answer. Changes made while a write is in flight
// gather (a job changed three times is written once) and go with the next.
// A failed write puts its records back to be written again (the whole
// record, so the state is kept; the events of that write are lost).
// Durability waits name the write that holds what the caller changed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "store/state_store.h"

namespace trainyard::server {

class Persister {
 public:
  // One write handed to the store: `seq` numbers writes from 1, in order.
  struct Write {
    uint64_t seq = 0;
    WriteBatch batch;
    std::vector<std::string> jobs;   // records it holds, written again on failure
    std::vector<std::string> nodes;
  };
  // Fills a batch with the current record of a job or node (nothing when it
  // no longer exists).
  using RecordWriter = std::function<void(const std::string& name, WriteBatch* batch)>;

  void MarkJob(const std::string& name) {
    dirty_jobs_.insert(name);
    if (job_observer_) job_observer_(name);
  }
  // Told of every job marked (the log hub follows tasks as they change).
  using JobObserver = std::function<void(const std::string& job)>;
  void SetJobObserver(JobObserver observer) { job_observer_ = std::move(observer); }
  void MarkNode(const std::string& name) { dirty_nodes_.insert(name); }
  // Changes that are not records (creates, events) go straight into the
  // next write.
  WriteBatch& batch() { return batch_; }

  // True while a write is with the store.
  bool in_flight() const { return in_flight_; }
  // True when something waits to be written.
  bool pending() const { return !dirty_jobs_.empty() || !dirty_nodes_.empty() || !batch_.empty(); }

  // The next write, or nullopt when one is in flight or nothing waits.
  std::optional<Write> Take(const RecordWriter& job, const RecordWriter& node);
  // What a write carries besides records: purges and metadata keys. The
  // shell sends the batch itself away, so a failed write's are handed back
  // (Done) for their owners to ask again, as records are marked again.
  struct RawWrites {
    std::vector<uint64_t> purges;
    std::vector<std::string> meta_keys;
  };
  // The store answered write `write_seq` with `status`. After a failure its
  // records are marked again unless `stopping`, and its raw writes are
  // returned (none after a success).
  RawWrites Done(uint64_t write_seq, const std::vector<std::string>& jobs, const std::vector<std::string>& nodes,
                 const absl::Status& status, bool stopping);

  // The write a durability wait must see answered for the changes made so
  // far, or nullopt when nothing waits to be written or is in flight. Call
  // after Take has had its chance (a write may just have been sent).
  // `pending_before` is pending() as it was before that Take.
  std::optional<uint64_t> DurableTarget(uint64_t sent_before, bool pending_before) const;
  uint64_t sent() const { return seq_sent_; }
  bool Answered(uint64_t target) const { return seq_done_ >= target; }
  // OK when write `target` succeeded (REQUIRES: Answered(target)).
  absl::Status ResultOf(uint64_t target) const;
  // The last write's error; OK once one succeeds.
  const absl::Status& last_error() const { return error_; }

 private:
  WriteBatch batch_;
  std::set<std::string> dirty_jobs_;
  std::set<std::string> dirty_nodes_;
  bool in_flight_ = false;
  RawWrites raw_in_flight_;  // of the write in flight
  uint64_t seq_sent_ = 0;
  uint64_t seq_done_ = 0;
  std::set<uint64_t> failed_;  // the last failed writes (bounded)
  absl::Status error_;
  JobObserver job_observer_;
};

}  // namespace trainyard::server
