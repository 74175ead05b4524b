// The in-memory StateStore. A batch is applied to copies of the records it
// touches (a stage) and published only when every write of it succeeded, so
// a failing batch leaves nothing behind, exactly like a rolled-back SQLite
// savepoint. CommitAsync callbacks run on a thread of the store's own, as the
// SQLite store's do, so callers meet the same threading in tests.
#include "api/states.h"
#include "store/memory_state_store.h"

#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "store/store_checks.h"

namespace trainyard {
namespace {

struct JobEntry {
  v1::JobRecord job;  // tasks in the order they were first written
  std::vector<v1::JobEventRecord> events;
};

struct Stage {
  std::map<uint64_t, JobEntry> jobs;
  std::map<std::string, std::optional<v1::NodeRecord>> nodes;
  std::map<std::string, std::string> meta;
  int64_t next_seq = 0;
};

void UpsertTask(v1::JobRecord& job, const v1::TaskRecord& task) {
  for (v1::TaskRecord& existing : *job.mutable_tasks()) {
    if (existing.role() == task.role() && existing.index() == task.index()) {
      existing = task;
      return;
    }
  }
  *job.add_tasks() = task;
}

}  // namespace

struct MemoryStateStore::Impl {
  absl::Mutex mu;
  std::map<uint64_t, JobEntry> jobs ABSL_GUARDED_BY(mu);
  std::map<std::string, uint64_t> names ABSL_GUARDED_BY(mu);
  std::map<std::string, v1::NodeRecord> nodes ABSL_GUARDED_BY(mu);
  std::map<std::string, std::string> meta ABSL_GUARDED_BY(mu);
  int64_t next_seq ABSL_GUARDED_BY(mu) = 1;
  absl::Status write_error ABSL_GUARDED_BY(mu);
  StoreStats stats ABSL_GUARDED_BY(mu);

  absl::Mutex cb_mu;
  std::deque<std::pair<Done, absl::Status>> callbacks ABSL_GUARDED_BY(cb_mu);
  bool stopping ABSL_GUARDED_BY(cb_mu) = false;
  std::thread cb_thread;

  // Returns the staged copy of a job, copying it from the store on first use;
  // nullptr when the job exists nowhere.
  JobEntry* Find(Stage& stage, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (auto it = stage.jobs.find(id); it != stage.jobs.end()) return &it->second;
    auto it = jobs.find(id);
    if (it == jobs.end()) return nullptr;
    return &stage.jobs.emplace(id, it->second).first->second;
  }

  bool NameTaken(const Stage& stage, const std::string& name, uint64_t except)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (const auto& [id, entry] : stage.jobs) {
      if (id != except && entry.job.name() == name) return true;
    }
    auto it = names.find(name);
    return it != names.end() && it->second != except && !stage.jobs.contains(it->second);
  }

  void AddEvent(Stage& stage, JobEntry& entry, v1::JobEventRecord event) {
    event.set_job_id(entry.job.id());
    event.set_seq(stage.next_seq++);
    entry.events.push_back(std::move(event));
  }

  absl::Status ApplyCreate(Stage& stage, const WriteBatch::CreateJobOp& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (absl::Status s = store_checks::ValidateNewJob(op.job); !s.ok()) return s;
    if (Find(stage, op.job.id()) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("create job: job id ", op.job.id(), " already exists"));
    }
    if (NameTaken(stage, op.job.name(), op.job.id())) {
      return absl::AlreadyExistsError(
          absl::StrCat("create job: job name '", op.job.name(), "' already exists"));
    }
    JobEntry& entry = stage.jobs[op.job.id()];
    entry.job = op.job;
    if (!op.first_event.kind().empty()) AddEvent(stage, entry, op.first_event);
    return absl::OkStatus();
  }

  absl::Status ApplyUpdate(Stage& stage, const WriteBatch::UpdateJobOp& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (absl::Status s = store_checks::ValidateUpdatedJob(op.job); !s.ok()) return s;
    JobEntry* entry = Find(stage, op.job.id());
    if (entry == nullptr) return store_checks::JobNotFound(op.job.id(), "update job");
    if (NameTaken(stage, op.job.name(), op.job.id())) {
      return absl::AlreadyExistsError(
          absl::StrCat("update job: job name '", op.job.name(), "' already exists"));
    }
    v1::JobRecord updated = op.job;
    updated.clear_tasks();
    updated.mutable_tasks()->Swap(entry->job.mutable_tasks());
    for (const v1::TaskRecord& task : op.job.tasks()) UpsertTask(updated, task);
    entry->job = std::move(updated);
    return absl::OkStatus();
  }

  absl::Status ApplyOp(Stage& stage, const WriteBatch::Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (const auto* create = std::get_if<WriteBatch::CreateJobOp>(&op)) {
      return ApplyCreate(stage, *create);
    }
    if (const auto* update = std::get_if<WriteBatch::UpdateJobOp>(&op)) {
      return ApplyUpdate(stage, *update);
    }
    if (const auto* put = std::get_if<WriteBatch::PutTaskOp>(&op)) {
      if (absl::Status s = store_checks::ValidateTask(put->job_id, put->task); !s.ok()) return s;
      JobEntry* entry = Find(stage, put->job_id);
      if (entry == nullptr) return store_checks::JobNotFound(put->job_id, "put task");
      UpsertTask(entry->job, put->task);
      return absl::OkStatus();
    }
    if (const auto* append = std::get_if<WriteBatch::AppendEventOp>(&op)) {
      JobEntry* entry = Find(stage, append->event.job_id());
      if (entry == nullptr)
        return store_checks::JobNotFound(append->event.job_id(), "append event");
      AddEvent(stage, *entry, append->event);
      return absl::OkStatus();
    }
    if (const auto* node = std::get_if<WriteBatch::PutNodeOp>(&op)) {
      if (absl::Status s = store_checks::ValidateNode(node->node); !s.ok()) return s;
      stage.nodes[node->node.info().name()] = node->node;
      return absl::OkStatus();
    }
    if (const auto* del = std::get_if<WriteBatch::DeleteNodeOp>(&op)) {
      stage.nodes[del->name] = std::nullopt;
      return absl::OkStatus();
    }
    const auto& meta_op = std::get<WriteBatch::PutMetaOp>(op);
    stage.meta[meta_op.key] = meta_op.value;
    return absl::OkStatus();
  }

  void Publish(Stage& stage) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (auto& [id, entry] : stage.jobs) {
      if (auto it = jobs.find(id); it != jobs.end()) names.erase(it->second.job.name());
      names[entry.job.name()] = id;
      jobs[id] = std::move(entry);
    }
    for (auto& [name, node] : stage.nodes) {
      if (node.has_value()) {
        nodes[name] = std::move(*node);
      } else {
        nodes.erase(name);
      }
    }
    for (auto& [key, value] : stage.meta) meta[key] = std::move(value);
    next_seq = stage.next_seq;
  }

  absl::Status Apply(const WriteBatch& batch) {
    absl::MutexLock lock(&mu);
    absl::Status status = write_error;
    Stage stage;
    stage.next_seq = next_seq;
    for (const WriteBatch::Op& op : batch.ops()) {
      if (!status.ok()) break;
      status = ApplyOp(stage, op);
    }
    if (status.ok()) Publish(stage);
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

}  // namespace trainyard

namespace trainyard {
namespace {

bool Matches(const JobFilter& filter, const v1::JobRecord& job) {
  if (!filter.queue.empty() && job.spec().queue() != filter.queue) return false;
  if (!filter.user.empty() && job.spec().user() != filter.user) return false;
  if (filter.states.empty()) return true;
  for (v1::JobState state : filter.states) {
    if (job.state() == state) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<v1::JobRecord> MemoryStateStore::GetJob(uint64_t id) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return it->second.job;
}

absl::StatusOr<v1::JobRecord> MemoryStateStore::GetJobByName(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->names.find(name);
  if (it == impl_->names.end()) {
    return absl::NotFoundError(absl::StrCat("job '", name, "' not found"));
  }
  return impl_->jobs.at(it->second).job;
}

absl::StatusOr<std::vector<v1::JobRecord>> MemoryStateStore::ListJobs(const JobFilter& filter) {
  absl::MutexLock lock(&impl_->mu);
  std::vector<v1::JobRecord> out;
  for (const auto& [id, entry] : impl_->jobs) {
    if (filter.limit > 0 && static_cast<int>(out.size()) >= filter.limit) break;
    if (!Matches(filter, entry.job)) continue;
    out.push_back(entry.job);
    if (!filter.include_tasks) out.back().clear_tasks();
  }
  return out;
}

absl::StatusOr<std::vector<v1::JobEventRecord>> MemoryStateStore::ListEvents(uint64_t job_id) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->jobs.find(job_id);
  if (it == impl_->jobs.end()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  }
  return it->second.events;
}

absl::StatusOr<v1::NodeRecord> MemoryStateStore::GetNode(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->nodes.find(name);
  if (it == impl_->nodes.end()) {
    return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  }
  return it->second;
}

absl::StatusOr<std::vector<v1::NodeRecord>> MemoryStateStore::ListNodes() {
  absl::MutexLock lock(&impl_->mu);
  std::vector<v1::NodeRecord> out;
  for (const auto& [name, node] : impl_->nodes) out.push_back(node);
  return out;
}

absl::StatusOr<std::string> MemoryStateStore::GetMeta(const std::string& key) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->meta.find(key);
  if (it == impl_->meta.end()) {
    return absl::NotFoundError(absl::StrCat("metadata key '", key, "' not found"));
  }
  return it->second;
}

absl::StatusOr<StoreSnapshot> MemoryStateStore::LoadAll() {
  absl::MutexLock lock(&impl_->mu);
  StoreSnapshot snapshot;
  for (const auto& [id, entry] : impl_->jobs) {
    if (!api::IsTerminal(entry.job.state())) snapshot.jobs.push_back(entry.job);
  }
  for (const auto& [name, node] : impl_->nodes) snapshot.nodes.push_back(node);
  snapshot.meta = impl_->meta;
  snapshot.max_job_id = impl_->jobs.empty() ? 0 : impl_->jobs.rbegin()->first;
  return snapshot;
}

absl::Status MemoryStateStore::CheckIntegrity() {
  absl::MutexLock lock(&impl_->mu);
  std::vector<v1::JobRecord> jobs;
  for (const auto& [id, entry] : impl_->jobs) jobs.push_back(entry.job);
  return store_checks::ProblemsToStatus("in-memory store",
                                        store_checks::FindAllocationConflicts(jobs));
}

StoreStats MemoryStateStore::Stats() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

}  // namespace trainyard
