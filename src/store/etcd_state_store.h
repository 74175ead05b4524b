// StateStore kept in etcd (`trainyard server --store etcd://...`), for a
// control plane that outlives one machine. The store holds every record in
// memory as well (a RecordSet, the same rule the in-memory store applies) and
// writes each batch's changes to etcd in one transaction before it answers;
// a committer thread groups concurrent batches into as few transactions as
// etcd's limits allow, as the SQLite store groups them into one. Reads are served from memory: while this server is the
// only writer (the leader, fenced below), memory and etcd agree.
//
// Keys, under a prefix (default "/trainyard/"):
//   j/<job id, 20 digits>                  the job's record without its tasks
//   t/<job id>/<chunk, 6 digits>           64 tasks of the job, in first-write order
//   e/<job id>/<seq, 20 digits>            one event
//   n/<node name>                          one node
//   m/<key>                                one metadata value
//
// Limits: a transaction holds at most max_txn_ops keys and max_request_bytes
// bytes (etcd's --max-txn-ops and --max-request-bytes; etcd's defaults are
// 128 and 1.5 MiB). Batches queued together share a transaction while its
// keys stay within the limit (one past the byte limit is split in halves).
// A batch larger than that by itself fails with ResourceExhausted, naming its
// size and the limit; a job of 2,000 tasks takes 34 keys.
//
// Fencing: after SetFence(key, revision), every write is a transaction that
// commits only while `key` still has that create revision (the leader's
// election key). A write refused by the fence fails with FailedPrecondition,
// every later write fails too, and on_write_lost runs: a deposed leader
// never writes again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/etcd_client.h"
#include "store/state_store.h"

namespace trainyard {

// The keys one transaction writes to create `job` with its first event
// (its row, its tasks' chunks, the event): what counts against max_txn_ops.
int EtcdKeysToCreateJob(const v1::JobRecord& job);

// `batch` cut, in order, into consecutive batches that each fit one etcd
// transaction of at most `max_txn_ops` keys and `max_request_bytes` bytes,
// for a writer whose batch may pass them (the server's write of everything
// that changed since its last one). Each write stays whole in one batch; one
// that alone passes a limit is a batch by itself (and fails as it would).
// Keys are counted as the store counts them for whole job records (as the
// server writes them), without dedup, and each key as `prefix_bytes` (the
// store's prefix) and a little more: a batch may come out smaller than it
// had to be, not larger.
std::vector<WriteBatch> SplitForEtcd(WriteBatch batch, int max_txn_ops, int64_t max_request_bytes,
                                     size_t prefix_bytes);

struct EtcdStoreOptions {
  EtcdConnectOptions connect;
  std::string prefix = "/trainyard/";
  int max_txn_ops = 128;
  int64_t max_request_bytes = 1536 * 1024;
  // At most this many batches in one transaction.
  int max_group_batches = 64;
  // Called on the committer thread (no lock held) when a write was refused
  // by the fence or its outcome is unknown (etcd unreachable for the whole
  // call timeout): the store then refuses every later write, and a server
  // steps down so that a standby reloads from etcd.
  std::function<void(const absl::Status&)> on_write_lost;
};

class EtcdStateStore : public StateStore {
 public:
  // Connects and reads every record under the prefix (the recovery). Fails
  // with Unavailable when no etcd member answers within the call timeout,
  // DataLoss when a record does not parse.
  static absl::StatusOr<std::unique_ptr<EtcdStateStore>> Open(const EtcdStoreOptions& options);
  ~EtcdStateStore() override;

  // Every later write commits only while `key` exists with `create_revision`.
  // `terms`: the leaderships the cluster has had (StoreStats.leader_terms).
  void SetFence(const std::string& key, int64_t create_revision, int64_t terms = 0);

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
  struct Impl;
  explicit EtcdStateStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainyard
