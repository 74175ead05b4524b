// The server's durable state: jobs with their tasks, an append-only event log
// per job, registered nodes and a small key/value table of server metadata.
// StateStore is the interface the server codes against; SqliteStateStore
// (sqlite_state_store.h) keeps it in SQLite under --data-dir, and
// MemoryStateStore (memory_state_store.h) is the fake for tests. The server
// owns the semantics (which states follow which); the store only keeps records
// and guarantees that a write is durable before Commit reports success and
// that a batch is applied entirely or not at all.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/histogram.h"
#include "proto/trainyard.pb.h"

namespace trainyard {

// A set of writes that a store applies atomically: after Commit either every
// write of the batch is durable, or none is visible. Build one per logical
// change (a submission, a scheduling decision placing many tasks, a task
// exit) and hand it to StateStore::Commit. Not thread-safe; a batch is a
// plain value.
class WriteBatch {
 public:
  // Creates a job: its row, every task in job.tasks and its first event (whose
  // job_id is set to job.id; none when first_event.kind is empty). The batch fails with
  // AlreadyExists if a job with this id or name exists, with InvalidArgument if job.id is 0, the
  // name is empty or two tasks share (role, index).
  struct CreateJobOp {
    v1::JobRecord job;
    v1::JobEventRecord first_event;
  };
  // Replaces a job's own fields (spec, state, reasons, times). Tasks listed in
  // job.tasks are upserted by (role, index); tasks not listed are kept. The
  // batch fails with NotFound if the job does not exist.
  struct UpdateJobOp {
    v1::JobRecord job;
  };
  // Upserts one task of a job by (role, index). NotFound if the job does not
  // exist (in the store or earlier in this batch).
  struct PutTaskOp {
    uint64_t job_id = 0;
    v1::TaskRecord task;
  };
  // Appends an event to event.job_id's log; the store assigns event.seq.
  // NotFound if the job does not exist.
  struct AppendEventOp {
    v1::JobEventRecord event;
  };
  // Upserts a node by node.info().name (InvalidArgument when empty).
  struct PutNodeOp {
    v1::NodeRecord node;
  };
  // Removes a node record; no error when it is absent.
  struct DeleteNodeOp {
    std::string name;
  };
  // Sets a metadata key (e.g. "next_job_id") to a value.
  struct PutMetaOp {
    std::string key;
    std::string value;
  };
  // Removes a job for good: its record, tasks and events (accounting's
  // retention). Its name is free; no error when it is absent. Ids are never
  // reused: creating the id again in the same write is AlreadyExists.
  struct PurgeJobOp {
    uint64_t id = 0;
  };
  // Removes a metadata key; no error when it is absent.
  struct DeleteMetaOp {
    std::string key;
  };
  using Op = std::variant<CreateJobOp, UpdateJobOp, PutTaskOp, AppendEventOp, PutNodeOp,
                          DeleteNodeOp, PutMetaOp, PurgeJobOp, DeleteMetaOp>;

  void CreateJob(v1::JobRecord job, v1::JobEventRecord first_event);
  void UpdateJob(v1::JobRecord job);
  void PutTask(uint64_t job_id, v1::TaskRecord task);
  void AppendEvent(v1::JobEventRecord event);
  void PutNode(v1::NodeRecord node);
  void DeleteNode(std::string name);
  void PutMeta(std::string key, std::string value);
  void DeleteMeta(std::string key);
  void PurgeJob(uint64_t id);

  // Returns the writes in the order they were added; stores apply them in it.
  const std::vector<Op>& ops() const { return ops_; }
  // Adds a write as it is; moves every write out (the batch is left empty).
  void Add(Op op) { ops_.push_back(std::move(op)); }
  std::vector<Op> TakeOps() { return std::exchange(ops_, {}); }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  void Clear() { ops_.clear(); }

 private:
  std::vector<Op> ops_;
};

// Which jobs ListJobs returns. Empty fields match everything.
struct JobFilter {
  std::vector<v1::JobState> states;  // any of these; empty = every state
  std::string queue;                 // spec.queue equals this
  std::string user;                  // spec.user equals this
  bool include_tasks = true;         // fill JobRecord.tasks
  int limit = 0;                     // at most this many (lowest ids); 0 = all
};

// Everything the server needs to resume after a restart, read as one
// consistent snapshot.
struct StoreSnapshot {
  std::vector<v1::JobRecord> jobs;    // live jobs (not SUCCEEDED/FAILED/KILLED), with tasks, by id
  std::vector<v1::NodeRecord> nodes;  // every node, by name
  std::map<std::string, std::string> meta;  // every metadata key
  uint64_t max_job_id = 0;                  // highest job id ever stored, live or not
};

// Counters for /metrics and benchmarks.
struct StoreStats {
  int64_t batches_committed = 0;  // Commit calls that succeeded
  int64_t batches_failed = 0;     // Commit calls that failed
  int64_t transactions = 0;       // durable transactions (fsyncs with sync on)
  // Each durable transaction: its time from BEGIN to COMMIT (the fsync
  // included) and how many batches it held (group commit).
  Histogram commit_seconds = LatencyHistogram();
  Histogram batch_size{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  // A store shared by several servers (etcd): the fence this server writes
  // under, i.e. its election key's create revision (a new leader, a higher
  // one), and since when (Unix ms); 0 for a store that is one server's own.
  int64_t leader_revision = 0;
  int64_t leader_since_unix_ms = 0;
  int64_t leader_terms = 0;  // leaderships the store's cluster has had (1 + failovers); 0: unknown
};

// The interface. Every method is thread-safe. Reads see every batch whose
// Commit has returned OK (or whose callback has been called with OK).
//
// Errors a caller can expect: InvalidArgument / NotFound / AlreadyExists for a
// batch that does not fit the stored state (nothing of it is applied);
// FailedPrecondition for a store opened read-only or closed; ResourceExhausted
// when the disk is full; DataLoss when the file is corrupt; Unavailable after
// an I/O error (the store then refuses every later write: restart the server).
class StateStore {
 public:
  using Done = std::function<void(absl::Status)>;

  virtual ~StateStore() = default;

  // Applies `batch` atomically and returns once it is durable. Concurrent
  // callers' batches are grouped into one transaction (group commit); a
  // failing batch fails alone and leaves no trace.
  virtual absl::Status Commit(WriteBatch batch) = 0;

  // Like Commit, but returns at once; `done` runs with the outcome once the
  // batch is durable (or failed), on the store's committer thread. `done` must
  // be quick and must not wait for another Commit of this store (Commit called
  // from `done` fails with FailedPrecondition rather than deadlock).
  virtual void CommitAsync(WriteBatch batch, Done done) = 0;

  // Returns a job with its tasks (in the order they were first written), or
  // NotFound.
  virtual absl::StatusOr<v1::JobRecord> GetJob(uint64_t id) = 0;

  // Returns the job with this name, or NotFound.
  virtual absl::StatusOr<v1::JobRecord> GetJobByName(const std::string& name) = 0;

  // Returns the jobs that match `filter`, by increasing id.
  virtual absl::StatusOr<std::vector<v1::JobRecord>> ListJobs(const JobFilter& filter) = 0;

  // Returns a job's events in append order (increasing seq); NotFound when the
  // job does not exist.
  virtual absl::StatusOr<std::vector<v1::JobEventRecord>> ListEvents(uint64_t job_id) = 0;

  // Returns one node, or NotFound.
  virtual absl::StatusOr<v1::NodeRecord> GetNode(const std::string& name) = 0;

  // Returns every node, by name.
  virtual absl::StatusOr<std::vector<v1::NodeRecord>> ListNodes() = 0;

  // Returns a metadata value, or NotFound.
  virtual absl::StatusOr<std::string> GetMeta(const std::string& key) = 0;

  // Returns every live job with its tasks, every node and all metadata, as of
  // one instant: what the server loads when it starts.
  virtual absl::StatusOr<StoreSnapshot> LoadAll() = 0;

  // Verifies the store: the file's own integrity (SQLite) and ours: every task
  // belongs to an existing job, every event to an existing job, every record
  // parses, and no GPU or port of a node is held by two live tasks (a task is
  // live when it has a node, is not in a terminal state and its job is not
  // terminal). Returns OK, or DataLoss listing every problem found.
  virtual absl::Status CheckIntegrity() = 0;

  // Returns the counters.
  virtual StoreStats Stats() = 0;
};

using StateStorePtr = std::unique_ptr<StateStore>;

}  // namespace trainyard
