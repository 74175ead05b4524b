// Applies a WriteBatch to the SQLite store inside the committer's
// transaction: protobuf records go to BLOB columns, next to the columns that
// reads filter on (job state, queue, user; task node and state).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "store/sqlite_store_impl.h"
#include "store/store_checks.h"

namespace trainyard {
namespace {

using sqlite::Database;
using sqlite::Statement;

absl::StatusOr<bool> JobExists(Database& db, uint64_t id) {
  absl::StatusOr<Statement*> stmt = db.Prepare("SELECT 1 FROM jobs WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, static_cast<int64_t>(id));
  absl::StatusOr<bool> row = (*stmt)->Step("looking up a job");
  (*stmt)->Reset();
  return row;
}

absl::Status RequireJob(Database& db, uint64_t id, const char* op) {
  absl::StatusOr<bool> exists = JobExists(db, id);
  if (!exists.ok()) return exists.status();
  return *exists ? absl::OkStatus() : store_checks::JobNotFound(id, op);
}

absl::Status PutTaskRow(Database& db, uint64_t job_id, const v1::TaskRecord& task) {
  absl::StatusOr<Statement*> stmt = db.Prepare(
      "INSERT INTO tasks(job_id, role, idx, node, state, record) VALUES(?, ?, ?, ?, ?, ?) "
      "ON CONFLICT(job_id, role, idx) DO UPDATE SET "
      "node = excluded.node, state = excluded.state, record = excluded.record");
  if (!stmt.ok()) return stmt.status();
  Statement& s = **stmt;
  s.BindInt(1, static_cast<int64_t>(job_id));
  s.BindText(2, task.role());
  s.BindInt(3, task.index());
  s.BindText(4, task.node());
  s.BindInt(5, task.state());
  s.BindBlob(6, task.SerializeAsString());
  absl::Status status = s.Run("writing a task");
  s.Reset();
  return status;
}

absl::Status PutTasks(Database& db, const v1::JobRecord& job) {
  for (const v1::TaskRecord& task : job.tasks()) {
    if (absl::Status s = PutTaskRow(db, job.id(), task); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The job's record less its tasks, cut from its encoding (nullopt when the
// encoding holds a field this walk does not know how to skip: a group).
std::optional<std::string> EncodingWithoutTasks(const v1::JobRecord& job) {
  std::string full = job.SerializeAsString();
  std::string out;
  out.reserve(full.size());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(full.data()),
                                            static_cast<int>(full.size()));
  for (;;) {
    int start = in.CurrentPosition();
    uint32_t tag = in.ReadTag();
    if (tag == 0) return out;
    bool ok = false;
    uint64_t varint = 0;
    uint32_t length = 0;
    switch (tag & 7) {  // wire types: varint, 64-bit, length-delimited, 32-bit
      case 0: ok = in.ReadVarint64(&varint); break;
      case 1: ok = in.Skip(8); break;
      case 2: ok = in.ReadVarint32(&length) && in.Skip(static_cast<int>(length)); break;
      case 5: ok = in.Skip(4); break;
      default: break;
    }
    if (!ok) return std::nullopt;
    if ((tag >> 3) != v1::JobRecord::kTasksFieldNumber) out.append(full, start, in.CurrentPosition() - start);
  }
}

// Returns the job's record without its tasks, which live in their own rows.
// Cut from its encoding: copying the record to clear its tasks copied every
// task and the whole spec first, on every write of a job.
std::string JobBlob(const v1::JobRecord& job) {
  if (job.tasks_size() == 0) return job.SerializeAsString();
  if (std::optional<std::string> cut = EncodingWithoutTasks(job)) return *std::move(cut);
  v1::JobRecord header = job;
  header.clear_tasks();
  return header.SerializeAsString();
}

absl::Status AppendEventRow(Database& db, uint64_t job_id, const v1::JobEventRecord& event) {
  absl::StatusOr<Statement*> stmt =
      db.Prepare("INSERT INTO events(job_id, time_ms, kind, text) VALUES(?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.status();
  Statement& s = **stmt;
  s.BindInt(1, static_cast<int64_t>(job_id));
  s.BindInt(2, event.time_ms());
  s.BindText(3, event.kind());
  s.BindText(4, event.text());
  absl::Status status = s.Run("appending an event");
  s.Reset();
  return status;
}

// Explains a constraint failure on the jobs table: a taken id or name.
absl::Status JobConflict(Database& db, const v1::JobRecord& job, const char* op,
                         const absl::Status& original) {
  if (!absl::IsAlreadyExists(original)) return original;
  absl::StatusOr<bool> exists = JobExists(db, job.id());
  if (!exists.ok()) return exists.status();
  if (*exists && std::string(op) == "create job") {
    return absl::AlreadyExistsError(absl::StrCat(op, ": job id ", job.id(), " already exists"));
  }
  return absl::AlreadyExistsError(
      absl::StrCat(op, ": job name '", job.name(), "' already exists"));
}

absl::Status CreateJob(Database& db, const WriteBatch::CreateJobOp& op) {
  if (absl::Status s = store_checks::ValidateNewJob(op.job); !s.ok()) return s;
  absl::StatusOr<Statement*> stmt = db.Prepare(
      "INSERT INTO jobs(id, name, state, queue, user, record) VALUES(?, ?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.status();
  Statement& s = **stmt;
  s.BindInt(1, static_cast<int64_t>(op.job.id()));
  s.BindText(2, op.job.name());
  s.BindInt(3, op.job.state());
  s.BindText(4, op.job.spec().queue());
  s.BindText(5, op.job.spec().user());
  s.BindBlob(6, JobBlob(op.job));
  absl::Status status = s.Run("creating a job");
  s.Reset();
  if (!status.ok()) return JobConflict(db, op.job, "create job", status);
  if (absl::Status t = PutTasks(db, op.job); !t.ok()) return t;
  if (op.first_event.kind().empty()) return absl::OkStatus();
  return AppendEventRow(db, op.job.id(), op.first_event);
}

absl::Status UpdateJob(Database& db, const WriteBatch::UpdateJobOp& op) {
  if (absl::Status s = store_checks::ValidateUpdatedJob(op.job); !s.ok()) return s;
  absl::StatusOr<Statement*> stmt = db.Prepare(
      "UPDATE jobs SET name = ?, state = ?, queue = ?, user = ?, record = ? WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  Statement& s = **stmt;
  s.BindText(1, op.job.name());
  s.BindInt(2, op.job.state());
  s.BindText(3, op.job.spec().queue());
  s.BindText(4, op.job.spec().user());
  s.BindBlob(5, JobBlob(op.job));
  s.BindInt(6, static_cast<int64_t>(op.job.id()));
  absl::Status status = s.Run("updating a job");
  s.Reset();
  if (!status.ok()) return JobConflict(db, op.job, "update job", status);
  if (sqlite3_changes(db.raw()) == 0) return store_checks::JobNotFound(op.job.id(), "update job");
  return PutTasks(db, op.job);
}

absl::Status PutNode(Database& db, const v1::NodeRecord& node) {
  if (absl::Status s = store_checks::ValidateNode(node); !s.ok()) return s;
  absl::StatusOr<Statement*> stmt = db.Prepare(
      "INSERT INTO nodes(name, state, record) VALUES(?, ?, ?) "
      "ON CONFLICT(name) DO UPDATE SET state = excluded.state, record = excluded.record");
  if (!stmt.ok()) return stmt.status();
  Statement& s = **stmt;
  s.BindText(1, node.info().name());
  s.BindInt(2, node.info().state());
  s.BindBlob(3, node.SerializeAsString());
  absl::Status status = s.Run("writing a node");
  s.Reset();
  return status;
}

absl::Status RunKeyed(Database& db, const char* sql, const std::string& a, const std::string* b,
                      const char* what) {
  absl::StatusOr<Statement*> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, a);
  if (b != nullptr) (*stmt)->BindBlob(2, *b);
  absl::Status status = (*stmt)->Run(what);
  (*stmt)->Reset();
  return status;
}

absl::Status ApplyOp(Database& db, const WriteBatch::Op& op) {
  if (const auto* create = std::get_if<WriteBatch::CreateJobOp>(&op)) return CreateJob(db, *create);
  if (const auto* update = std::get_if<WriteBatch::UpdateJobOp>(&op)) return UpdateJob(db, *update);
  if (const auto* put = std::get_if<WriteBatch::PutTaskOp>(&op)) {
    if (absl::Status s = store_checks::ValidateTask(put->job_id, put->task); !s.ok()) return s;
    if (absl::Status s = RequireJob(db, put->job_id, "put task"); !s.ok()) return s;
    return PutTaskRow(db, put->job_id, put->task);
  }
  if (const auto* append = std::get_if<WriteBatch::AppendEventOp>(&op)) {
    uint64_t job_id = append->event.job_id();
    if (absl::Status s = RequireJob(db, job_id, "append event"); !s.ok()) return s;
    return AppendEventRow(db, job_id, append->event);
  }
  if (const auto* node = std::get_if<WriteBatch::PutNodeOp>(&op)) return PutNode(db, node->node);
  if (const auto* del = std::get_if<WriteBatch::DeleteNodeOp>(&op)) {
    return RunKeyed(db, "DELETE FROM nodes WHERE name = ?", del->name, nullptr, "deleting a node");
  }
  if (const auto* purge = std::get_if<WriteBatch::PurgeJobOp>(&op)) {
    std::string id = absl::StrCat(purge->id);
    for (const char* sql : {"DELETE FROM events WHERE job_id = CAST(? AS INTEGER)",
                            "DELETE FROM tasks WHERE job_id = CAST(? AS INTEGER)",
                            "DELETE FROM jobs WHERE id = CAST(? AS INTEGER)"}) {
      if (absl::Status s = RunKeyed(db, sql, id, nullptr, "purging a job"); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (const auto* del = std::get_if<WriteBatch::DeleteMetaOp>(&op)) {
    return RunKeyed(db, "DELETE FROM meta WHERE key = ?", del->key, nullptr, "deleting metadata");
  }
  const auto& meta = std::get<WriteBatch::PutMetaOp>(op);
  return RunKeyed(db,
                  "INSERT INTO meta(key, value) VALUES(?, ?) "
                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                  meta.key, &meta.value, "writing metadata");
}

}  // namespace

absl::Status ApplyBatch(Database& db, const WriteBatch& batch) {
  for (const WriteBatch::Op& op : batch.ops()) {
    if (absl::Status s = ApplyOp(db, op); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace trainyard
