// StateStore kept in memory, for tests of the server: the same semantics as
// SqliteStateStore (atomic batches, the same errors for batches that do not
// fit, CommitAsync callbacks on a thread of the store's own), nothing on
// disk, and a hook to make writes fail.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "store/state_store.h"

namespace trainyard {

class MemoryStateStore : public StateStore {
 public:
  MemoryStateStore();
  ~MemoryStateStore() override;

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

  // Makes every later Commit fail with `status` without applying anything
  // (as a full or read-only disk would); OK restores normal writes.
  void SetWriteErrorForTest(absl::Status status);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainyard
