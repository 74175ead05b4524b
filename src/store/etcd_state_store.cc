#include "store/etcd_state_store.h"

#include <algorithm>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/check.h"
#include "store/record_set.h"
#include "store/store_checks.h"

namespace trainyard {
namespace {

constexpr int kTasksPerChunk = 64;

std::string JobKey(const std::string& prefix, uint64_t id) {
  return absl::StrFormat("%sj/%020d", prefix, id);
}
std::string ChunkKey(const std::string& prefix, uint64_t id, int chunk) {
  return absl::StrFormat("%st/%020d/%06d", prefix, id, chunk);
}
std::string EventKey(const std::string& prefix, uint64_t id, int64_t seq) {
  return absl::StrFormat("%se/%020d/%020d", prefix, id, seq);
}

void AddPut(etcdserverpb::TxnRequest& txn, std::string key, std::string value) {
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(std::move(key));
  put->set_value(std::move(value));
}

// What recovery collects before it assembles jobs (keys come in key order:
// events before their jobs, chunks after).
struct Loaded {
  std::map<uint64_t, JobEntry> jobs;
  std::map<uint64_t, std::map<int, v1::JobRecord>> chunks;
  std::vector<v1::NodeRecord> nodes;
  std::map<std::string, std::string> meta;
  std::vector<std::string> problems;
};

// Files one key-value of the store into `loaded`.
void Parse(const std::string& prefix, const mvccpb::KeyValue& kv, Loaded& loaded) {
  absl::string_view key = kv.key();
  key.remove_prefix(prefix.size());
  auto bad = [&](const char* why) {
    loaded.problems.push_back(absl::StrCat("key ", kv.key(), ": ", why));
  };
  if (key.size() < 2 || key[1] != '/') {
    // The election's keys (server/leadership.h): leader, leader-terms,
    // leader-standby/ADDRESS.
    if (key.substr(0, 6) != "leader") bad("not a record of this store");
    return;
  }
  char kind = key[0];
  key.remove_prefix(2);
  if (kind == 'n') {
    v1::NodeRecord node;
    if (!node.ParseFromString(kv.value())) return bad("node record does not parse");
    loaded.nodes.push_back(std::move(node));
    return;
  }
  if (kind == 'm') {
    loaded.meta[std::string(key)] = kv.value();
    return;
  }
  uint64_t id = 0;
  if (key.size() < 20 || !absl::SimpleAtoi(key.substr(0, 20), &id)) return bad("no job id");
  absl::string_view rest = key.substr(20);
  if (kind == 'j') {
    if (!rest.empty()) return bad("not a record of this store");
    v1::JobRecord& job = loaded.jobs[id].job;
    if (!job.ParseFromString(kv.value()) || job.id() != id) bad("job record does not parse or names another id");
    return;
  }
  int64_t number = 0;
  if (rest.size() < 2 || rest[0] != '/' || !absl::SimpleAtoi(rest.substr(1), &number)) {
    return bad("no sequence number");
  }
  if (kind == 't') {
    if (!loaded.chunks[id][static_cast<int>(number)].ParseFromString(kv.value())) {
      bad("task chunk does not parse");
    }
    return;
  }
  if (kind == 'e') {
    v1::JobEventRecord event;
    if (!event.ParseFromString(kv.value())) return bad("event does not parse");
    loaded.jobs[id].events.push_back(std::move(event));
    return;
  }
  bad("not a record of this store");
}

}  // namespace

int EtcdKeysToCreateJob(const v1::JobRecord& job) {
  return 1 + (job.tasks_size() + kTasksPerChunk - 1) / kTasksPerChunk + 1;
}

namespace {

// A key's share of a request beside its value and the prefix: the rest of
// the key (at most 48 bytes: "t/" 20 digits "/" 6 digits) and the op's framing.
constexpr int64_t kKeyOverheadBytes = 80;

int ChunksOf(int tasks) { return (tasks + kTasksPerChunk - 1) / kTasksPerChunk; }

// The keys and bytes one write puts in a transaction, at most.
std::pair<int, int64_t> EtcdCost(const WriteBatch::Op& op, int64_t prefix_bytes) {
  auto cost = [prefix_bytes](int keys, int64_t bytes) {
    return std::make_pair(keys, bytes + keys * (prefix_bytes + kKeyOverheadBytes));
  };
  if (const auto* create = std::get_if<WriteBatch::CreateJobOp>(&op)) {
    return cost(EtcdKeysToCreateJob(create->job),
                static_cast<int64_t>(create->job.ByteSizeLong() + create->first_event.ByteSizeLong()));
  }
  if (const auto* update = std::get_if<WriteBatch::UpdateJobOp>(&op)) {
    return cost(1 + ChunksOf(update->job.tasks_size()), static_cast<int64_t>(update->job.ByteSizeLong()));
  }
  if (const auto* put = std::get_if<WriteBatch::PutTaskOp>(&op)) {
    // The task's whole chunk is written again: up to 64 tasks like it.
    return cost(1, static_cast<int64_t>(put->task.ByteSizeLong()) * kTasksPerChunk);
  }
  if (const auto* append = std::get_if<WriteBatch::AppendEventOp>(&op)) {
    return cost(1, static_cast<int64_t>(append->event.ByteSizeLong()));
  }
  if (const auto* node = std::get_if<WriteBatch::PutNodeOp>(&op)) {
    return cost(1, static_cast<int64_t>(node->node.ByteSizeLong()));
  }
  if (const auto* meta = std::get_if<WriteBatch::PutMetaOp>(&op)) {
    return cost(1, static_cast<int64_t>(meta->key.size() + meta->value.size()));
  }
  if (std::holds_alternative<WriteBatch::PurgeJobOp>(op)) return cost(3, 0);
  return cost(1, 0);  // a node or metadata key deleted
}

}  // namespace

std::vector<WriteBatch> SplitForEtcd(WriteBatch batch, int max_txn_ops, int64_t max_request_bytes,
                                     size_t prefix_bytes) {
  // Room for the fence's compare and the request's own framing.
  const int64_t room = std::max(max_request_bytes - 1024, max_request_bytes / 2);
  std::vector<WriteBatch> out(1);
  int keys = 0;
  int64_t bytes = 0;
  for (WriteBatch::Op& op : batch.TakeOps()) {
    auto [op_keys, op_bytes] = EtcdCost(op, static_cast<int64_t>(prefix_bytes));
    if (!out.back().empty() && (keys + op_keys > max_txn_ops || bytes + op_bytes > room)) {
      out.emplace_back();
      keys = 0;
      bytes = 0;
    }
    keys += op_keys;
    bytes += op_bytes;
    out.back().Add(std::move(op));
  }
  return out;
}

struct EtcdStateStore::Impl {
  struct Pending {
    WriteBatch batch;
    Done done;
  };

  EtcdStoreOptions options;
  std::unique_ptr<EtcdClient> client;

  absl::Mutex mu;
  RecordSet records ABSL_GUARDED_BY(mu);
  absl::Status write_error ABSL_GUARDED_BY(mu);
  std::string fence_key ABSL_GUARDED_BY(mu);
  int64_t fence_revision ABSL_GUARDED_BY(mu) = 0;
  StoreStats stats ABSL_GUARDED_BY(mu);

  absl::Mutex queue_mu;
  std::deque<Pending> queue ABSL_GUARDED_BY(queue_mu);
  bool stopping ABSL_GUARDED_BY(queue_mu) = false;
  std::thread committer;

  // Reads every record under the prefix into `records`.
  absl::Status Recover() {
    Loaded loaded;
    const std::string& prefix = options.prefix;
    absl::StatusOr<int64_t> revision = client->RangePrefix(
        prefix, [&](const mvccpb::KeyValue& kv) { Parse(prefix, kv, loaded); });
    if (!revision.ok()) return revision.status();
    for (const auto& [id, entry] : loaded.jobs) {
      if (entry.job.id() != id) {
        loaded.problems.push_back(absl::StrCat("job ", id, ": events without a job record"));
      }
    }
    for (const auto& [id, chunks] : loaded.chunks) {
      if (!loaded.jobs.contains(id)) loaded.problems.push_back(absl::StrCat("tasks of job ", id, " without a job"));
    }
    if (!loaded.problems.empty()) {
      return store_checks::ProblemsToStatus("etcd store under " + prefix, loaded.problems);
    }
    absl::MutexLock lock(&mu);
    for (auto& [id, entry] : loaded.jobs) {
      for (auto& [chunk, tasks] : loaded.chunks[id]) {
        for (v1::TaskRecord& task : *tasks.mutable_tasks()) {
          *entry.job.add_tasks() = std::move(task);
        }
      }
      records.LoadJob(std::move(entry));
    }
    for (v1::NodeRecord& node : loaded.nodes) records.LoadNode(std::move(node));
    for (auto& [key, value] : loaded.meta) records.LoadMeta(key, std::move(value));
    return absl::OkStatus();
  }

  // The transaction that writes a stage's changes, or ResourceExhausted when
  // it would pass etcd's limits.
  absl::StatusOr<etcdserverpb::TxnRequest> BuildTxn(RecordStage& stage) {
    const std::string& prefix = options.prefix;
    etcdserverpb::TxnRequest txn;
    for (auto& [id, staged] : stage.jobs) {
      v1::JobRecord& job = staged.entry.job;
      if (staged.purged) {  // its row, task chunks and events
        txn.add_success()->mutable_request_delete_range()->set_key(JobKey(prefix, id));
        for (std::string range : {absl::StrFormat("%st/%020d/", prefix, id), absl::StrFormat("%se/%020d/", prefix, id)}) {
          etcdserverpb::DeleteRangeRequest* del = txn.add_success()->mutable_request_delete_range();
          del->set_range_end(EtcdPrefixEnd(range));
          del->set_key(std::move(range));
        }
        continue;
      }
      if (staged.row_changed) {
        google::protobuf::RepeatedPtrField<v1::TaskRecord> tasks;
        tasks.Swap(job.mutable_tasks());
        AddPut(txn, JobKey(prefix, id), job.SerializeAsString());
        tasks.Swap(job.mutable_tasks());
      }
      int last_chunk = -1;
      for (int position : staged.tasks_changed) {
        int chunk = position / kTasksPerChunk;
        if (chunk == last_chunk) continue;
        last_chunk = chunk;
        v1::JobRecord holder;
        int end = std::min(job.tasks_size(), (chunk + 1) * kTasksPerChunk);
        for (int i = chunk * kTasksPerChunk; i < end; ++i) *holder.add_tasks() = job.tasks(i);
        AddPut(txn, ChunkKey(prefix, id, chunk), holder.SerializeAsString());
      }
      for (size_t i = staged.first_new_event; i < staged.entry.events.size(); ++i) {
        const v1::JobEventRecord& event = staged.entry.events[i];
        AddPut(txn, EventKey(prefix, id, event.seq()), event.SerializeAsString());
      }
    }
    for (const auto& [name, node] : stage.nodes) {
      std::string key = absl::StrCat(prefix, "n/", name);
      if (node.has_value()) {
        AddPut(txn, std::move(key), node->SerializeAsString());
      } else {
        txn.add_success()->mutable_request_delete_range()->set_key(std::move(key));
      }
    }
    for (const auto& [key, value] : stage.meta) {
      if (value.has_value()) {
        AddPut(txn, absl::StrCat(prefix, "m/", key), *value);
      } else {
        txn.add_success()->mutable_request_delete_range()->set_key(absl::StrCat(prefix, "m/", key));
      }
    }
    int64_t bytes = static_cast<int64_t>(txn.ByteSizeLong());
    if (txn.success_size() > options.max_txn_ops || bytes > options.max_request_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "etcd store: the write needs ", txn.success_size(), " keys and ", bytes,
          " bytes in one transaction; etcd allows ", options.max_txn_ops, " keys and ",
          options.max_request_bytes,
          " bytes (its --max-txn-ops and --max-request-bytes, given to the server as "
          "--etcd-max-txn-ops and --etcd-max-request-bytes)"));
    }
    return txn;
  }

  // Writes a stage to etcd and publishes it; the outcome of every batch in it.
  absl::Status Write(RecordStage stage) {
    std::string fence_key_now;
    int64_t fence_revision_now = 0;
    {
      absl::MutexLock lock(&mu);
      if (!write_error.ok()) return write_error;
      fence_key_now = fence_key;
      fence_revision_now = fence_revision;
    }
    absl::StatusOr<etcdserverpb::TxnRequest> txn = BuildTxn(stage);
    if (!txn.ok()) return txn.status();
    if (!fence_key_now.empty()) {
      etcdserverpb::Compare* compare = txn->add_compare();
      compare->set_key(fence_key_now);
      compare->set_target(etcdserverpb::Compare::CREATE);
      compare->set_result(etcdserverpb::Compare::EQUAL);
      compare->set_create_revision(fence_revision_now);
    }
    absl::Time start = absl::Now();
    absl::StatusOr<etcdserverpb::TxnResponse> response = client->Txn(*txn);
    double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    absl::Status lost;
    if (!response.ok()) {
      // The write may or may not have landed: memory can no longer vouch for
      // etcd, so nothing more is written until a server reloads from etcd.
      lost = absl::UnavailableError(absl::StrCat(
          response.status().message(), " (the etcd store refuses every later write: a server must "
          "reload its state from etcd)"));
    } else if (!response->succeeded()) {
      lost = absl::FailedPreconditionError(absl::StrCat(
          "etcd store: this server is no longer the leader (", fence_key_now,
          " was created again or removed); its write was refused and so is every later one"));
    }
    if (!lost.ok()) {
      {
        absl::MutexLock lock(&mu);
        write_error = lost;
      }
      // The leader steps down (a standby reloads from etcd and serves).
      if (options.on_write_lost) options.on_write_lost(lost);
      return lost;
    }
    absl::MutexLock lock(&mu);
    ++stats.transactions;
    stats.commit_seconds.Observe(seconds);
    stats.batch_size.Observe(stage.batches);
    records.Publish(std::move(stage));
    return absl::OkStatus();
  }

  // The keys BuildTxn puts in a stage's transaction (what counts against
  // max_txn_ops), counted without building it.
  static int StageKeys(const RecordStage& stage) {
    int keys = static_cast<int>(stage.nodes.size() + stage.meta.size());
    for (const auto& [id, staged] : stage.jobs) {
      if (staged.purged) {
        keys += 3;
        continue;
      }
      keys += staged.row_changed ? 1 : 0;
      int last_chunk = -1;
      for (int position : staged.tasks_changed) {
        int chunk = position / kTasksPerChunk;
        if (chunk != last_chunk) ++keys;
        last_chunk = chunk;
      }
      keys += static_cast<int>(staged.entry.events.size() - staged.first_new_event);
    }
    return keys;
  }

  // Writes the batches `order` (positions in `group`, in order) in as few
  // transactions as etcd's limits allow: each transaction takes batches
  // while its keys stay within max_txn_ops; one over max_request_bytes is
  // split in halves. A batch that alone passes a limit fails by itself.
  void WriteInOrder(std::vector<Pending>& group, const std::vector<size_t>& order,
                    std::vector<absl::Status>& outcome) {
    size_t next = 0;
    while (next < order.size()) {
      RecordStage stage;
      std::vector<size_t> staged;
      {
        absl::MutexLock lock(&mu);
        stage = records.NewStage();
        for (; next < order.size(); ++next) {
          size_t i = order[next];
          outcome[i] = records.Stage(group[i].batch, stage);  // the stage as it was when it fails
          if (!outcome[i].ok()) continue;
          if (!staged.empty() && StageKeys(stage) > options.max_txn_ops) {
            // Batch i starts the next transaction: this one is staged again
            // without it (the same batches on the same records stage alike).
            stage = records.NewStage();
            for (size_t j : staged) {
              outcome[j] = records.Stage(group[j].batch, stage);
              TY_CHECK(outcome[j].ok(), "a batch staged once failed to stage again: %s",
                       std::string(outcome[j].message()).c_str());
            }
            break;
          }
          staged.push_back(i);
        }
      }
      if (staged.empty()) continue;
      absl::Status status = Write(std::move(stage));
      if (absl::IsResourceExhausted(status) && staged.size() > 1) {
        std::vector<size_t> first(staged.begin(), staged.begin() + static_cast<ptrdiff_t>(staged.size() / 2));
        std::vector<size_t> second(staged.begin() + static_cast<ptrdiff_t>(staged.size() / 2), staged.end());
        WriteInOrder(group, first, outcome);
        WriteInOrder(group, second, outcome);
        continue;
      }
      for (size_t i : staged) outcome[i] = status;
    }
  }

  // Stages and writes a group of batches, in as few transactions as fit.
  std::vector<absl::Status> CommitGroup(std::vector<Pending>& group) {
    std::vector<absl::Status> outcome(group.size());
    std::vector<size_t> order(group.size());
    for (size_t i = 0; i < group.size(); ++i) order[i] = i;
    WriteInOrder(group, order, outcome);
    return outcome;
  }

  void Run() {
    while (true) {
      std::vector<Pending> group;
      {
        absl::MutexLock lock(&queue_mu);
        queue_mu.Await(absl::Condition(
            +[](Impl* impl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl->queue_mu) {
              return impl->stopping || !impl->queue.empty();
            },
            this));
        if (queue.empty()) return;
        while (!queue.empty() && static_cast<int>(group.size()) < options.max_group_batches) {
          group.push_back(std::move(queue.front()));
          queue.pop_front();
        }
      }
      std::vector<absl::Status> outcome = CommitGroup(group);
      {
        absl::MutexLock lock(&mu);
        for (const absl::Status& s : outcome) ++(s.ok() ? stats.batches_committed : stats.batches_failed);
      }
      for (size_t i = 0; i < group.size(); ++i) {
        if (group[i].done) group[i].done(outcome[i]);
      }
    }
  }
};

EtcdStateStore::EtcdStateStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<EtcdStateStore>> EtcdStateStore::Open(const EtcdStoreOptions& options) {
  if (options.prefix.empty() || options.prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd store prefix '", options.prefix, "': must end with '/'"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(options.connect);
  if (!client.ok()) return client.status();
  impl->client = std::move(*client);
  if (absl::Status s = impl->Recover(); !s.ok()) return s;
  Impl* raw = impl.get();
  raw->committer = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<EtcdStateStore>(new EtcdStateStore(std::move(impl)));
}

EtcdStateStore::~EtcdStateStore() {
  {
    absl::MutexLock lock(&impl_->queue_mu);
    impl_->stopping = true;
  }
  impl_->committer.join();
}

void EtcdStateStore::SetFence(const std::string& key, int64_t create_revision, int64_t terms) {
  absl::MutexLock lock(&impl_->mu);
  impl_->stats.leader_terms = terms;
  impl_->fence_key = key;
  impl_->fence_revision = create_revision;
  impl_->stats.leader_revision = create_revision;
  impl_->stats.leader_since_unix_ms = absl::ToUnixMillis(absl::Now());
}

absl::Status EtcdStateStore::Commit(WriteBatch batch) {
  if (std::this_thread::get_id() == impl_->committer.get_id()) {
    return absl::FailedPreconditionError(
        "Commit called from a CommitAsync callback would wait for itself; use CommitAsync there");
  }
  absl::Notification done;
  absl::Status outcome;
  CommitAsync(std::move(batch), [&](absl::Status status) {
    outcome = std::move(status);
    done.Notify();
  });
  done.WaitForNotification();
  return outcome;
}

void EtcdStateStore::CommitAsync(WriteBatch batch, Done done) {
  absl::MutexLock lock(&impl_->queue_mu);
  impl_->queue.push_back({std::move(batch), std::move(done)});
}

absl::StatusOr<v1::JobRecord> EtcdStateStore::GetJob(uint64_t id) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetJob(id);
}

absl::StatusOr<v1::JobRecord> EtcdStateStore::GetJobByName(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetJobByName(name);
}

absl::StatusOr<std::vector<v1::JobRecord>> EtcdStateStore::ListJobs(const JobFilter& filter) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.ListJobs(filter);
}

absl::StatusOr<std::vector<v1::JobEventRecord>> EtcdStateStore::ListEvents(uint64_t job_id) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.ListEvents(job_id);
}

absl::StatusOr<v1::NodeRecord> EtcdStateStore::GetNode(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetNode(name);
}

absl::StatusOr<std::vector<v1::NodeRecord>> EtcdStateStore::ListNodes() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.ListNodes();
}

absl::StatusOr<std::string> EtcdStateStore::GetMeta(const std::string& key) {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.GetMeta(key);
}

absl::StatusOr<StoreSnapshot> EtcdStateStore::LoadAll() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->records.LoadAll();
}

absl::Status EtcdStateStore::CheckIntegrity() {
  // What etcd holds, read afresh: every record must parse, and no GPU or
  // port may be held twice.
  Loaded loaded;
  const std::string& prefix = impl_->options.prefix;
  absl::StatusOr<int64_t> revision = impl_->client->RangePrefix(
      prefix, [&](const mvccpb::KeyValue& kv) { Parse(prefix, kv, loaded); });
  if (!revision.ok()) return revision.status();
  std::vector<std::string> problems = loaded.problems;
  std::vector<v1::JobRecord> jobs;
  for (auto& [id, entry] : loaded.jobs) {
    if (entry.job.id() != id) {
      problems.push_back(absl::StrCat("job ", id, ": no job record (only its tasks or events)"));
      continue;
    }
    for (auto& [chunk, tasks] : loaded.chunks[id]) {
      for (const v1::TaskRecord& task : tasks.tasks()) *entry.job.add_tasks() = task;
    }
    jobs.push_back(std::move(entry.job));
  }
  for (const auto& [id, chunks] : loaded.chunks) {
    if (!loaded.jobs.contains(id)) problems.push_back(absl::StrCat("tasks of job ", id, " without a job"));
  }
  for (std::string& conflict : store_checks::FindAllocationConflicts(jobs)) {
    problems.push_back(std::move(conflict));
  }
  return store_checks::ProblemsToStatus("etcd store under " + impl_->options.prefix, problems);
}

StoreStats EtcdStateStore::Stats() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

}  // namespace trainyard
