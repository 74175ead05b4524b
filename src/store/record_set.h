// The records of a store held in memory, and the one rule by which a
// WriteBatch is applied to them: every write of a batch is staged on copies
// of the records it touches, and published only when all of them succeeded,
// so a failing batch leaves nothing behind. The in-memory store is a
// RecordSet alone; the etcd store keeps one as its mirror of what etcd holds
// and writes to etcd exactly what a stage says changed.
//
// Not thread-safe: the owning store locks around every call.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/state_store.h"

namespace trainyard {

struct JobEntry {
  v1::JobRecord job;  // tasks in the order they were first written
  std::vector<v1::JobEventRecord> events;
};

// A job as a stage holds it, with what the stage changed of it.
struct StagedJob {
  JobEntry entry;
  bool row_changed = false;           // the job's own fields (created or updated)
  std::set<int> tasks_changed;        // positions in entry.job.tasks()
  size_t first_new_event = 0;         // entry.events from here on are new
  bool purged = false;                // removed for good (WriteBatch::PurgeJobOp)
};

// Writes of one or more batches, not yet published.
struct RecordStage {
  std::map<uint64_t, StagedJob> jobs;
  std::map<std::string, std::optional<v1::NodeRecord>> nodes;  // nullopt: deleted
  std::map<std::string, std::optional<std::string>> meta;  // nullopt: deleted
  // Each name a job took in this stage (created or renamed), with its id: a
  // lookup, never the truth (the job may have been renamed again since).
  std::multimap<std::string, uint64_t> names;
  int64_t next_seq = 1;
  int batches = 0;
};

class RecordSet {
 public:
  // An empty stage on top of the published records.
  RecordStage NewStage() const;

  // Applies `batch` on top of `stage` (which may hold earlier batches of the
  // same group). On success the stage holds the batch's writes as well; on
  // failure it is as it was and the error names the write that failed.
  absl::Status Stage(const WriteBatch& batch, RecordStage& stage) const;

  // Makes a stage's writes the published records.
  void Publish(RecordStage stage);

  // Reads, with the errors StateStore documents.
  absl::StatusOr<v1::JobRecord> GetJob(uint64_t id) const;
  absl::StatusOr<v1::JobRecord> GetJobByName(const std::string& name) const;
  std::vector<v1::JobRecord> ListJobs(const JobFilter& filter) const;
  absl::StatusOr<std::vector<v1::JobEventRecord>> ListEvents(uint64_t job_id) const;
  absl::StatusOr<v1::NodeRecord> GetNode(const std::string& name) const;
  std::vector<v1::NodeRecord> ListNodes() const;
  absl::StatusOr<std::string> GetMeta(const std::string& key) const;
  StoreSnapshot LoadAll() const;
  // Every job with its tasks (CheckIntegrity's input).
  std::vector<v1::JobRecord> AllJobs() const;

  // Loading records read from elsewhere (the etcd store's recovery): each
  // replaces what the set held under its key. Events must come in seq order
  // per job; next_seq follows the highest seq seen.
  void LoadJob(JobEntry entry);
  void LoadNode(v1::NodeRecord node);
  void LoadMeta(std::string key, std::string value);

 private:
  struct Lookup;

  std::map<uint64_t, JobEntry> jobs_;
  std::map<std::string, uint64_t> names_;
  std::map<std::string, v1::NodeRecord> nodes_;
  std::map<std::string, std::string> meta_;
  int64_t next_seq_ = 1;
};

}  // namespace trainyard
