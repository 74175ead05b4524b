// The SQLite store's write path. Callers queue batches; one committer thread
// takes everything queued, applies each batch inside its own savepoint of one
// transaction and commits it with one fsync, then reports each batch's
// outcome. A batch that does not fit rolls back to its savepoint and fails
// alone; a store error (disk full, I/O error) fails the whole group, so
// nothing is acknowledged that was not kept.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "store/sqlite_store_impl.h"

namespace trainyard {
namespace {

// True for outcomes that concern one batch only; anything else is a store
// error that fails the whole group.
bool IsBatchOutcome(const absl::Status& s) {
  return s.ok() || absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsAlreadyExists(s);
}

// True for errors after which the store cannot be trusted to write again.
bool IsSticky(const absl::Status& s) { return absl::IsUnavailable(s) || absl::IsDataLoss(s); }

}  // namespace

SqliteStore::SqliteStore(std::string path, SqliteStoreOptions options, int lock_fd,
                         std::unique_ptr<sqlite::Database> writer,
                         std::unique_ptr<sqlite::Database> reader)
    : path_(std::move(path)),
      options_(std::move(options)),
      lock_fd_(lock_fd),
      writer_(std::move(writer)),
      reader_(std::move(reader)) {
  if (writer_ != nullptr) committer_ = std::thread([this] { RunCommitter(); });
}

SqliteStore::~SqliteStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (committer_.joinable()) committer_.join();
  {
    absl::MutexLock lock(&reader_mu_);
    reader_.reset();
  }
  writer_.reset();  // the last connection checkpoints the WAL into the file
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::Status SqliteStore::Commit(WriteBatch batch) {
  if (std::this_thread::get_id() == committer_.get_id()) {
    return absl::FailedPreconditionError(
        "Commit called from a CommitAsync callback would wait for itself; use CommitAsync there");
  }
  std::promise<absl::Status> promise;
  std::future<absl::Status> result = promise.get_future();
  CommitAsync(std::move(batch), [&promise](absl::Status s) { promise.set_value(std::move(s)); });
  return result.get();
}

void SqliteStore::CommitAsync(WriteBatch batch, Done done) {
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (writer_ == nullptr) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("store ", path_, " is open read-only; nothing was written"));
    } else if (stopping_) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("store ", path_, " is closing; nothing was written"));
    } else {
      queue_.push_back(Pending{std::move(batch), std::move(done), absl::OkStatus()});
      return;
    }
    ++stats_.batches_failed;
  }
  if (done) done(refused);
}

void SqliteStore::RunCommitter() {
  const size_t max_group =
      options_.group_commit ? static_cast<size_t>(std::max(1, options_.max_group_batches)) : 1;
  // Start of the previous transaction (steady clock: a step of the wall
  // clock must not stall writes) and how many batches it held.
  std::chrono::steady_clock::time_point last_start{};
  size_t last_size = 0;
  while (true) {
    std::vector<Pending> group;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SqliteStore* s)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->stopping_ || !s->queue_.empty(); },
          this));
      if (queue_.empty()) return;
      // Writers are busy (the last transaction held several batches and began
      // moments ago): let more gather rather than start a transaction per
      // batch. A lone writer's commits are never held back.
      absl::Duration wait = options_.commit_interval - absl::FromChrono(std::chrono::steady_clock::now() - last_start);
      if (last_size > 1 && queue_.size() < max_group && wait > absl::ZeroDuration()) {
        std::pair<SqliteStore*, size_t> arg(this, max_group);
        mu_.AwaitWithTimeout(
            absl::Condition(+[](std::pair<SqliteStore*, size_t>* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return a->first->stopping_ || a->first->queue_.size() >= a->second;
            }, &arg),
            std::min(wait, options_.commit_interval));
      }
      size_t n = std::min(queue_.size(), max_group);
      for (size_t i = 0; i < n; ++i) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    last_start = std::chrono::steady_clock::now();
    last_size = group.size();
    CommitGroup(group);
    for (Pending& p : group) {
      if (p.done) p.done(p.status);
    }
  }
}

absl::Status SqliteStore::ApplyInSavepoint(const WriteBatch& batch) {
  if (absl::Status s = writer_->Run("SAVEPOINT batch", "starting a batch"); !s.ok()) return s;
  absl::Status status = ApplyBatch(*writer_, batch);
  if (status.ok()) return writer_->Run("RELEASE batch", "ending a batch");
  if (!IsBatchOutcome(status)) return status;
  absl::Status undo = writer_->Run("ROLLBACK TO batch", "undoing a failed batch");
  if (undo.ok()) undo = writer_->Run("RELEASE batch", "undoing a failed batch");
  return undo.ok() ? status : undo;
}

void SqliteStore::CommitGroup(std::vector<Pending>& group) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status fatal;
  {
    absl::MutexLock lock(&mu_);
    fatal = broken_;
  }
  if (fatal.ok()) fatal = writer_->Run("BEGIN IMMEDIATE", "starting a transaction");
  bool any_applied = false;
  for (Pending& p : group) {
    if (!fatal.ok()) break;
    p.status = ApplyInSavepoint(p.batch);
    if (!IsBatchOutcome(p.status)) fatal = p.status;
    any_applied = any_applied || p.status.ok();
  }
  if (fatal.ok()) {
    fatal = any_applied ? writer_->Run("COMMIT", "committing")
                        : writer_->Run("ROLLBACK", "ending an empty transaction");
  }
  if (!fatal.ok()) {
    FailGroup(group, fatal);
    return;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::MutexLock lock(&mu_);
  if (any_applied) {
    ++stats_.transactions;
    stats_.commit_seconds.Observe(seconds);
    stats_.batch_size.Observe(static_cast<double>(group.size()));
  }
  for (const Pending& p : group)
    ++(p.status.ok() ? stats_.batches_committed : stats_.batches_failed);
}

void SqliteStore::FailGroup(std::vector<Pending>& group, const absl::Status& fatal) {
  writer_->RollBackAfterFailure("rolling back a failed transaction");
  absl::MutexLock lock(&mu_);
  if (IsSticky(fatal) && broken_.ok()) {
    broken_ = absl::Status(
        fatal.code(),
        absl::StrCat(fatal.message(), "; the store refuses further writes: restart the server"));
  }
  // The first writes refused say "restart the server" too, not only the later ones.
  const absl::Status& reported = IsSticky(fatal) ? broken_ : fatal;
  for (Pending& p : group) {
    if (p.status.ok() || !IsBatchOutcome(p.status)) p.status = reported;
    ++stats_.batches_failed;
  }
}

StoreStats SqliteStore::Stats() {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace trainyard
