// The SQLite StateStore's class, shared by its source files: opening and the
// committer thread (sqlite_state_store.cc), applying batches
// (sqlite_apply.cc), and reads, recovery loading and integrity checks
// (sqlite_reads.cc).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/sqlite_db.h"
#include "store/sqlite_state_store.h"
#include "store/state_store.h"

namespace trainyard {

// Applies every write of `batch` inside the caller's transaction. Returns
// InvalidArgument / NotFound / AlreadyExists when the batch does not fit the
// stored state (the caller rolls back to its savepoint), or a store error.
absl::Status ApplyBatch(sqlite::Database& db, const WriteBatch& batch);

class SqliteStore : public StateStore {
 public:
  // `writer` is null for a read-only store. Starts the committer thread.
  SqliteStore(std::string path, SqliteStoreOptions options, int lock_fd,
              std::unique_ptr<sqlite::Database> writer, std::unique_ptr<sqlite::Database> reader);
  ~SqliteStore() override;

  absl::Status Commit(WriteBatch batch) override;
  void CommitAsync(WriteBatch batch, Done done) override;
  absl::StatusOr<v1::JobRecord> GetJob(uint64_t id) override;
  absl::StatusOr<v1::JobRecord> GetJobByName(const std::string& name) override;
  absl::StatusOr<std::vector<v1::JobRecord>> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<std::vector<v1::JobEventRecord>> ListEvents(uint64_t job_id) override;
  absl::StatusOr<v1::NodeRecord> GetNode(const std::string& name) override;
  absl::StatusOr<std::vector<v1::NodeRecord>> ListNodes() override;
  absl::StatusOr<std::string> GetMeta(const std::string& key) override;
  absl::StatusOr<StoreSnapshot> LoadAll() override;
  absl::Status CheckIntegrity() override;
  StoreStats Stats() override;

 private:
  struct Pending {
    WriteBatch batch;
    Done done;
    absl::Status status;
  };

  void RunCommitter();
  void CommitGroup(std::vector<Pending>& group);
  absl::Status ApplyInSavepoint(const WriteBatch& batch);
  void FailGroup(std::vector<Pending>& group, const absl::Status& fatal);

  absl::StatusOr<v1::JobRecord> ReadJob(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  absl::Status ReadTasks(v1::JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  absl::StatusOr<StoreSnapshot> ReadSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  absl::Status ReadLiveTasks(StoreSnapshot& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  absl::Status ReadNodesAndMeta(StoreSnapshot& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  std::vector<std::string> FindOrphans() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  std::vector<std::string> FindBadRecords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reader_mu_);
  absl::Status ParseError(const char* what, const std::string& key) const;

  const std::string path_;
  const SqliteStoreOptions options_;
  const int lock_fd_;
  std::unique_ptr<sqlite::Database> writer_;  // only the committer thread uses it

  absl::Mutex reader_mu_;
  std::unique_ptr<sqlite::Database> reader_ ABSL_GUARDED_BY(reader_mu_);

  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set after an I/O error or corruption: every later write fails with it.
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  StoreStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread committer_;
};

}  // namespace trainyard
