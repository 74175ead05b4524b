// The in-memory StateStore. A batch is applied to copies of the records it
// touches (a stage) and published only when every write of it succeeded, so
// a failing batch leaves nothing behind, exactly like a rolled-back SQLite
// savepoint. CommitAsync callbacks run on a thread of the store's own, as the
// SQLite store's do, so callers meet the same threading in tests.
#include "store/memory_state_store.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "store/record_set.h"
#include "store/store_checks.h"

namespace trainyard {

struct MemoryStateStore::Impl {
  absl::Mutex mu;
  RecordSet records ABSL_GUARDED_BY(mu);
  absl::Status write_error ABSL_GUARDED_BY(mu);
  StoreStats stats ABSL_GUARDED_BY(mu);

  absl::Mutex cb_mu;
  std::deque<std::pair<Done, absl::Status>> callbacks ABSL_GUARDED_BY(cb_mu);
  bool stopping ABSL_GUARDED_BY(cb_mu) = false;
  std::thread cb_thread;

  absl::Status Apply(const WriteBatch& batch) {
    absl::MutexLock lock(&mu);
    absl::Status status = write_error;
    RecordStage stage = records.NewStage();
    if (status.ok()) status = records.Stage(batch, stage);
    if (status.ok()) records.Publish(std::move(stage));
    ++(status.ok() ? stats.batches_committed : stats.batches_failed);
    if (status.ok()) ++stats.transactions;
    return status;
  }

  void RunCallbacks() {
    while (true) {
      std::pair<Done, absl::Status> next;
      {
        absl::MutexLock lock(&cb_mu);
        cb_mu.Await(absl::Condition(
            +[](Impl* impl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl->cb_mu) {
              return impl->stopping || !impl->callbacks.empty();
            },
            this));
        if (callbacks.empty()) return;
        next = std::move(callbacks.front());
        callbacks.pop_front();
      }
      if (next.first) next.first(next.second);
    }
  }
};

MemoryStateStore::MemoryStateStore() : impl_(std::make_unique<Impl>()) {
  impl_->cb_thread = std::thread([this] { impl_->RunCallbacks(); });
}

MemoryStateStore::~MemoryStateStore() {
  {
    absl::MutexLock lock(&impl_->cb_mu);
    impl_->stopping = true;
  }
  impl_->cb_thread.join();
}

absl::Status MemoryStateStore::Commit(WriteBatch batch) {
  // The SQLite store would deadlock here; refuse the same way so tests catch it.
  if (std::this_thread::get_id() == impl_->cb_thread.get_id()) {
    return absl::FailedPreconditionError(
        "Commit called from a CommitAsync callback would wait for itself; use CommitAsync there");
  }
  return impl_->Apply(batch);
}

void MemoryStateStore::CommitAsync(WriteBatch batch, Done done) {
  absl::Status status = impl_->Apply(batch);
  absl::MutexLock lock(&impl_->cb_mu);
  impl_->callbacks.emplace_back(std::move(done), std::move(status));
}

void MemoryStateStore::SetWriteErrorForTest(absl::Status status) {
  absl::MutexLock lock(&impl_->mu);
  impl_->write_error = std::move(status);
}

absl::StatusOr<v1::JobRecord> MemoryStateStore::GetJob(uint64_t id) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetJob(id);
}

absl::StatusOr<v1::JobRecord> MemoryStateStore::GetJobByName(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetJobByName(name);
}

absl::StatusOr<std::vector<v1::JobRecord>> MemoryStateStore::ListJobs(const JobFilter& filter) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.ListJobs(filter);
}

absl::StatusOr<std::vector<v1::JobEventRecord>> MemoryStateStore::ListEvents(uint64_t job_id) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.ListEvents(job_id);
}

absl::StatusOr<v1::NodeRecord> MemoryStateStore::GetNode(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetNode(name);
}

absl::StatusOr<std::vector<v1::NodeRecord>> MemoryStateStore::ListNodes() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.ListNodes();
}

absl::StatusOr<std::string> MemoryStateStore::GetMeta(const std::string& key) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetMeta(key);
}

absl::StatusOr<StoreSnapshot> MemoryStateStore::LoadAll() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.LoadAll();
}

absl::Status MemoryStateStore::CheckIntegrity() {
  absl::MutexLock lock(&impl_->mu);
  return store_checks::ProblemsToStatus(
      "in-memory store", store_checks::FindAllocationConflicts(impl_->records.AllJobs()));
}

StoreStats MemoryStateStore::Stats() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

}  // namespace trainyard
