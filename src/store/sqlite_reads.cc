// The SQLite store's read path: single records, listings, the recovery load
// (one read transaction, so it is one consistent snapshot) and the integrity
// check behind `trainyard server --check-store`. Reads use their own
// connection, so they never wait for a commit's fsync.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/sqlite_store_impl.h"
#include "store/store_checks.h"

namespace trainyard {
namespace {

using sqlite::Statement;

std::string ListJobsSql(const JobFilter& filter) {
  std::string sql = "SELECT id, record FROM jobs WHERE 1";
  if (!filter.states.empty()) {
    std::vector<int> states(filter.states.begin(), filter.states.end());
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(states, ","), ")");
  }
  if (!filter.queue.empty()) absl::StrAppend(&sql, " AND queue = ?1");
  if (!filter.user.empty()) absl::StrAppend(&sql, " AND user = ?2");
  absl::StrAppend(&sql, " ORDER BY id");
  if (filter.limit > 0) absl::StrAppend(&sql, " LIMIT ", filter.limit);
  return sql;
}

// Runs a prepared statement, calling `row` for each result row; resets it.
template <typename RowFn>
absl::Status ForEachRow(Statement& stmt, absl::string_view what, RowFn row) {
  absl::Status status;
  while (status.ok()) {
    absl::StatusOr<bool> more = stmt.Step(what);
    if (!more.ok()) {
      status = more.status();
    } else if (!*more) {
      break;
    } else {
      status = row(stmt);
    }
  }
  stmt.Reset();
  return status;
}

}  // namespace

absl::Status SqliteStore::ParseError(const char* what, const std::string& key) const {
  return absl::DataLossError(absl::StrCat("store ", path_, ": the record of ", what, " ", key,
                                          " does not parse; run `trainyard server --check-store`"));
}

absl::Status SqliteStore::ReadTasks(v1::JobRecord& job) {
  absl::StatusOr<Statement*> stmt =
      reader_->Prepare("SELECT record FROM tasks WHERE job_id = ? ORDER BY rowid");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, static_cast<int64_t>(job.id()));
  return ForEachRow(**stmt, "reading tasks", [&](Statement& s) {
    absl::string_view blob = s.Blob(0);
    if (!job.add_tasks()->ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
      return ParseError("a task of job", absl::StrCat(job.id()));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<v1::JobRecord> SqliteStore::ReadJob(uint64_t id) {
  absl::StatusOr<Statement*> stmt = reader_->Prepare("SELECT record FROM jobs WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, static_cast<int64_t>(id));
  bool found = false;
  v1::JobRecord job;
  absl::Status status = ForEachRow(**stmt, "reading a job", [&](Statement& s) {
    found = true;
    absl::string_view blob = s.Blob(0);
    return job.ParseFromArray(blob.data(), static_cast<int>(blob.size()))
               ? absl::OkStatus()
               : ParseError("job", absl::StrCat(id));
  });
  if (!status.ok()) return status;
  if (!found) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  if (absl::Status t = ReadTasks(job); !t.ok()) return t;
  return job;
}

absl::StatusOr<v1::JobRecord> SqliteStore::GetJob(uint64_t id) {
  absl::MutexLock lock(&reader_mu_);
  return ReadJob(id);
}

absl::StatusOr<v1::JobRecord> SqliteStore::GetJobByName(const std::string& name) {
  absl::MutexLock lock(&reader_mu_);
  absl::StatusOr<Statement*> stmt = reader_->Prepare("SELECT id FROM jobs WHERE name = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, name);
  int64_t id = 0;
  absl::Status status = ForEachRow(**stmt, "looking up a job", [&](Statement& s) {
    id = s.Int(0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (id == 0) return absl::NotFoundError(absl::StrCat("job '", name, "' not found"));
  return ReadJob(static_cast<uint64_t>(id));
}

absl::StatusOr<std::vector<v1::JobRecord>> SqliteStore::ListJobs(const JobFilter& filter) {
  absl::MutexLock lock(&reader_mu_);
  if (absl::Status s = reader_->Exec("BEGIN", "starting a read"); !s.ok()) return s;
  absl::StatusOr<Statement*> stmt = reader_->Prepare(ListJobsSql(filter));
  std::vector<v1::JobRecord> jobs;
  absl::Status status = stmt.status();
  if (status.ok()) {
    if (!filter.queue.empty()) (*stmt)->BindText(1, filter.queue);
    if (!filter.user.empty()) (*stmt)->BindText(2, filter.user);
    status = ForEachRow(**stmt, "listing jobs", [&](Statement& s) {
      absl::string_view blob = s.Blob(1);
      if (!jobs.emplace_back().ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
        return ParseError("job", absl::StrCat(s.Int(0)));
      }
      return absl::OkStatus();
    });
  }
  for (size_t i = 0; status.ok() && filter.include_tasks && i < jobs.size(); ++i) {
    status = ReadTasks(jobs[i]);
  }
  reader_->EndRead();
  if (!status.ok()) return status;
  return jobs;
}

absl::StatusOr<std::vector<v1::JobEventRecord>> SqliteStore::ListEvents(uint64_t job_id) {
  absl::MutexLock lock(&reader_mu_);
  if (absl::Status s = reader_->Exec("BEGIN", "starting a read"); !s.ok()) return s;
  absl::StatusOr<Statement*> exists = reader_->Prepare("SELECT 1 FROM jobs WHERE id = ?");
  absl::Status status = exists.status();
  bool found = false;
  if (status.ok()) {
    (*exists)->BindInt(1, static_cast<int64_t>(job_id));
    status = ForEachRow(**exists, "looking up a job", [&](Statement&) {
      found = true;
      return absl::OkStatus();
    });
  }
  std::vector<v1::JobEventRecord> events;
  absl::StatusOr<Statement*> stmt = reader_->Prepare(
      "SELECT seq, time_ms, kind, text FROM events WHERE job_id = ? ORDER BY seq");
  if (status.ok()) status = stmt.status();
  if (status.ok() && found) {
    (*stmt)->BindInt(1, static_cast<int64_t>(job_id));
    status = ForEachRow(**stmt, "reading events", [&](Statement& s) {
      v1::JobEventRecord& e = events.emplace_back();
      e.set_job_id(job_id);
      e.set_seq(s.Int(0));
      e.set_time_ms(s.Int(1));
      e.set_kind(std::string(s.Text(2)));
      e.set_text(std::string(s.Text(3)));
      return absl::OkStatus();
    });
  }
  reader_->EndRead();
  if (!status.ok()) return status;
  if (!found) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return events;
}

}  // namespace trainyard
