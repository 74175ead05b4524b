#include "store/record_set.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/states.h"
#include "store/store_checks.h"

namespace trainyard {
namespace {

// Returns the position of the task (role, index) in the job, upserting it.
int UpsertTask(v1::JobRecord& job, const v1::TaskRecord& task) {
  for (int i = 0; i < job.tasks_size(); ++i) {
    v1::TaskRecord& existing = *job.mutable_tasks(i);
    if (existing.role() == task.role() && existing.index() == task.index()) {
      existing = task;
      return i;
    }
  }
  *job.add_tasks() = task;
  return job.tasks_size() - 1;
}

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

// One batch's view while it is staged: its own writes (`sub`) over the
// group's earlier ones (`group`) over the published records.
struct RecordSet::Lookup {
  const RecordSet& set;
  const RecordStage& group;
  RecordStage& sub;

  // Returns the batch's copy of a job, copying it on first use; nullptr when
  // the job exists nowhere.
  StagedJob* Find(uint64_t id) {
    if (auto it = sub.jobs.find(id); it != sub.jobs.end()) return it->second.purged ? nullptr : &it->second;
    if (auto it = group.jobs.find(id); it != group.jobs.end()) {
      if (it->second.purged) return nullptr;
      return &sub.jobs.emplace(id, it->second).first->second;
    }
    auto it = set.jobs_.find(id);
    if (it == set.jobs_.end()) return nullptr;
    StagedJob& staged = sub.jobs[id];
    staged.entry = it->second;
    staged.first_new_event = staged.entry.events.size();
    return &staged;
  }

  // Whether a job other than `except` holds `name` as the batch would leave
  // it. Every job that holds it got it in this batch (sub.names), earlier in
  // the group (group.names) or before (set.names_); each candidate is judged
  // by its newest copy.
  bool NameTaken(const std::string& name, uint64_t except) const {
    auto holds = [&](uint64_t id) {
      if (id == except) return false;
      if (auto it = sub.jobs.find(id); it != sub.jobs.end()) {
        return !it->second.purged && it->second.entry.job.name() == name;
      }
      if (auto it = group.jobs.find(id); it != group.jobs.end()) {
        return !it->second.purged && it->second.entry.job.name() == name;
      }
      auto it = set.jobs_.find(id);
      return it != set.jobs_.end() && it->second.job.name() == name;
    };
    for (const RecordStage* stage : {static_cast<const RecordStage*>(&sub), &group}) {
      for (auto [it, end] = stage->names.equal_range(name); it != end; ++it) {
        if (holds(it->second)) return true;
      }
    }
    auto it = set.names_.find(name);
    return it != set.names_.end() && holds(it->second);
  }

  void AddEvent(StagedJob& staged, v1::JobEventRecord event) {
    event.set_job_id(staged.entry.job.id());
    event.set_seq(sub.next_seq++);
    staged.entry.events.push_back(std::move(event));
  }

  absl::Status Create(const WriteBatch::CreateJobOp& op) {
    if (absl::Status s = store_checks::ValidateNewJob(op.job); !s.ok()) return s;
    if (Find(op.job.id()) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("create job: job id ", op.job.id(), " already exists"));
    }
    if (NameTaken(op.job.name(), op.job.id())) {
      return absl::AlreadyExistsError(
          absl::StrCat("create job: job name '", op.job.name(), "' already exists"));
    }
    // Ids are never reused: one purged earlier in this write stays gone (its
    // keys are deleted, not overwritten).
    if (auto it = sub.jobs.find(op.job.id()); it != sub.jobs.end() && it->second.purged) {
      return absl::AlreadyExistsError(absl::StrCat("create job: job id ", op.job.id(), " was purged in this write"));
    }
    if (auto it = group.jobs.find(op.job.id()); it != group.jobs.end() && it->second.purged) {
      return absl::AlreadyExistsError(absl::StrCat("create job: job id ", op.job.id(), " was purged in this write"));
    }
    StagedJob& staged = sub.jobs[op.job.id()];
    staged.entry.job = op.job;
    staged.row_changed = true;
    sub.names.emplace(op.job.name(), op.job.id());
    for (int i = 0; i < op.job.tasks_size(); ++i) staged.tasks_changed.insert(i);
    if (!op.first_event.kind().empty()) AddEvent(staged, op.first_event);
    return absl::OkStatus();
  }

  absl::Status Update(const WriteBatch::UpdateJobOp& op) {
    if (absl::Status s = store_checks::ValidateUpdatedJob(op.job); !s.ok()) return s;
    StagedJob* staged = Find(op.job.id());
    if (staged == nullptr) return store_checks::JobNotFound(op.job.id(), "update job");
    if (NameTaken(op.job.name(), op.job.id())) {
      return absl::AlreadyExistsError(
          absl::StrCat("update job: job name '", op.job.name(), "' already exists"));
    }
    if (staged->entry.job.name() != op.job.name()) sub.names.emplace(op.job.name(), op.job.id());
    v1::JobRecord updated = op.job;
    updated.clear_tasks();
    updated.mutable_tasks()->Swap(staged->entry.job.mutable_tasks());
    for (const v1::TaskRecord& task : op.job.tasks()) {
      staged->tasks_changed.insert(UpsertTask(updated, task));
    }
    staged->entry.job = std::move(updated);
    staged->row_changed = true;
    return absl::OkStatus();
  }

  absl::Status Apply(const WriteBatch::Op& op) {
    if (const auto* create = std::get_if<WriteBatch::CreateJobOp>(&op)) return Create(*create);
    if (const auto* update = std::get_if<WriteBatch::UpdateJobOp>(&op)) return Update(*update);
    if (const auto* put = std::get_if<WriteBatch::PutTaskOp>(&op)) {
      if (absl::Status s = store_checks::ValidateTask(put->job_id, put->task); !s.ok()) return s;
      StagedJob* staged = Find(put->job_id);
      if (staged == nullptr) return store_checks::JobNotFound(put->job_id, "put task");
      staged->tasks_changed.insert(UpsertTask(staged->entry.job, put->task));
      return absl::OkStatus();
    }
    if (const auto* append = std::get_if<WriteBatch::AppendEventOp>(&op)) {
      StagedJob* staged = Find(append->event.job_id());
      if (staged == nullptr) {
        return store_checks::JobNotFound(append->event.job_id(), "append event");
      }
      AddEvent(*staged, append->event);
      return absl::OkStatus();
    }
    if (const auto* node = std::get_if<WriteBatch::PutNodeOp>(&op)) {
      if (absl::Status s = store_checks::ValidateNode(node->node); !s.ok()) return s;
      sub.nodes[node->node.info().name()] = node->node;
      return absl::OkStatus();
    }
    if (const auto* del = std::get_if<WriteBatch::DeleteNodeOp>(&op)) {
      sub.nodes[del->name] = std::nullopt;
      return absl::OkStatus();
    }
    if (const auto* purge = std::get_if<WriteBatch::PurgeJobOp>(&op)) {
      if (StagedJob* staged = Find(purge->id)) staged->purged = true;
      return absl::OkStatus();
    }
    if (const auto* del = std::get_if<WriteBatch::DeleteMetaOp>(&op)) {
      sub.meta[del->key] = std::nullopt;
      return absl::OkStatus();
    }
    const auto& meta_op = std::get<WriteBatch::PutMetaOp>(op);
    sub.meta[meta_op.key] = meta_op.value;
    return absl::OkStatus();
  }
};

RecordStage RecordSet::NewStage() const {
  RecordStage stage;
  stage.next_seq = next_seq_;
  return stage;
}

absl::Status RecordSet::Stage(const WriteBatch& batch, RecordStage& stage) const {
  RecordStage sub;
  sub.next_seq = stage.next_seq;
  Lookup lookup{*this, stage, sub};
  for (const WriteBatch::Op& op : batch.ops()) {
    if (absl::Status s = lookup.Apply(op); !s.ok()) return s;
  }
  for (auto& [id, staged] : sub.jobs) stage.jobs[id] = std::move(staged);
  for (auto& [name, node] : sub.nodes) stage.nodes[name] = std::move(node);
  for (auto& [key, value] : sub.meta) stage.meta[key] = std::move(value);
  stage.names.merge(sub.names);
  stage.next_seq = sub.next_seq;
  ++stage.batches;
  return absl::OkStatus();
}

void RecordSet::Publish(RecordStage stage) {
  // Old names go first (only where the name is still this job's), so a
  // stage that renames one job and gives its old name to another keeps both.
  for (auto& [id, staged] : stage.jobs) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    auto name = names_.find(it->second.job.name());
    if (name != names_.end() && name->second == id) names_.erase(name);
  }
  for (auto& [id, staged] : stage.jobs) {
    if (staged.purged) {
      jobs_.erase(id);
      continue;
    }
    names_[staged.entry.job.name()] = id;
    jobs_[id] = std::move(staged.entry);
  }
  for (auto& [name, node] : stage.nodes) {
    if (node.has_value()) {
      nodes_[name] = std::move(*node);
    } else {
      nodes_.erase(name);
    }
  }
  for (auto& [key, value] : stage.meta) {
    if (value.has_value()) {
      meta_[key] = std::move(*value);
    } else {
      meta_.erase(key);
    }
  }
  next_seq_ = stage.next_seq;
}

absl::StatusOr<v1::JobRecord> RecordSet::GetJob(uint64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return it->second.job;
}

absl::StatusOr<v1::JobRecord> RecordSet::GetJobByName(const std::string& name) const {
  auto it = names_.find(name);
  if (it == names_.end()) return absl::NotFoundError(absl::StrCat("job '", name, "' not found"));
  return jobs_.at(it->second).job;
}

std::vector<v1::JobRecord> RecordSet::ListJobs(const JobFilter& filter) const {
  std::vector<v1::JobRecord> out;
  for (const auto& [id, entry] : jobs_) {
    if (filter.limit > 0 && static_cast<int>(out.size()) >= filter.limit) break;
    if (!Matches(filter, entry.job)) continue;
    out.push_back(entry.job);
    if (!filter.include_tasks) out.back().clear_tasks();
  }
  return out;
}

absl::StatusOr<std::vector<v1::JobEventRecord>> RecordSet::ListEvents(uint64_t job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return it->second.events;
}

absl::StatusOr<v1::NodeRecord> RecordSet::GetNode(const std::string& name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  return it->second;
}

std::vector<v1::NodeRecord> RecordSet::ListNodes() const {
  std::vector<v1::NodeRecord> out;
  out.reserve(nodes_.size());
  for (const auto& [name, node] : nodes_) out.push_back(node);
  return out;
}

absl::StatusOr<std::string> RecordSet::GetMeta(const std::string& key) const {
  auto it = meta_.find(key);
  if (it == meta_.end()) {
    return absl::NotFoundError(absl::StrCat("metadata key '", key, "' not found"));
  }
  return it->second;
}

StoreSnapshot RecordSet::LoadAll() const {
  StoreSnapshot snapshot;
  for (const auto& [id, entry] : jobs_) {
    if (!api::IsTerminal(entry.job.state())) snapshot.jobs.push_back(entry.job);
  }
  snapshot.nodes = ListNodes();
  snapshot.meta = meta_;
  snapshot.max_job_id = jobs_.empty() ? 0 : jobs_.rbegin()->first;
  return snapshot;
}

std::vector<v1::JobRecord> RecordSet::AllJobs() const {
  std::vector<v1::JobRecord> out;
  out.reserve(jobs_.size());
  for (const auto& [id, entry] : jobs_) out.push_back(entry.job);
  return out;
}

void RecordSet::LoadJob(JobEntry entry) {
  uint64_t id = entry.job.id();
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    auto name = names_.find(it->second.job.name());
    if (name != names_.end() && name->second == id) names_.erase(name);
  }
  names_[entry.job.name()] = id;
  if (!entry.events.empty()) next_seq_ = std::max(next_seq_, entry.events.back().seq() + 1);
  jobs_[id] = std::move(entry);
}

void RecordSet::LoadNode(v1::NodeRecord node) {
  std::string name = node.info().name();
  nodes_[name] = std::move(node);
}

void RecordSet::LoadMeta(std::string key, std::string value) { meta_[std::move(key)] = std::move(value); }

}  // namespace trainyard
