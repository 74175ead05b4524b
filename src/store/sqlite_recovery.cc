// The SQLite store's node and metadata reads, the recovery load (LoadAll, one
// read transaction over live jobs, their tasks, every node and all metadata)
// and the integrity check behind `trainyard server --check-store`.
#include <unordered_map>
#include <utility>

#include "api/states.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/sqlite_store_impl.h"
#include "store/store_checks.h"

namespace trainyard {
namespace {

using sqlite::Statement;

std::string LiveStatesSql() {
  std::vector<int> live;
  const google::protobuf::EnumDescriptor* d = v1::JobState_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    int n = d->value(i)->number();
    if (!api::IsTerminal(static_cast<v1::JobState>(n))) live.push_back(n);
  }
  return absl::StrJoin(live, ",");
}

template <typename RowFn>
absl::Status EachRow(sqlite::Database& db, const std::string& sql, absl::string_view what,
                     RowFn row) {
  absl::StatusOr<Statement*> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::Status status;
  while (status.ok()) {
    absl::StatusOr<bool> more = (*stmt)->Step(what);
    if (!more.ok()) {
      status = more.status();
    } else if (!*more) {
      break;
    } else {
      status = row(**stmt);
    }
  }
  (*stmt)->Reset();
  return status;
}

template <typename Message>
bool ParseBlob(Statement& s, int col, Message& message) {
  absl::string_view blob = s.Blob(col);
  return message.ParseFromArray(blob.data(), static_cast<int>(blob.size()));
}

}  // namespace

absl::StatusOr<v1::NodeRecord> SqliteStore::GetNode(const std::string& name) {
  absl::MutexLock lock(&reader_mu_);
  absl::StatusOr<Statement*> stmt = reader_->Prepare("SELECT record FROM nodes WHERE name = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, name);
  absl::StatusOr<bool> row = (*stmt)->Step("reading a node");
  v1::NodeRecord node;
  absl::Status status = row.status();
  if (status.ok() && *row && !ParseBlob(**stmt, 0, node)) status = ParseError("node", name);
  (*stmt)->Reset();
  if (!status.ok()) return status;
  if (!*row) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  return node;
}

absl::StatusOr<std::vector<v1::NodeRecord>> SqliteStore::ListNodes() {
  absl::MutexLock lock(&reader_mu_);
  std::vector<v1::NodeRecord> nodes;
  absl::Status status = EachRow(
      *reader_, "SELECT name, record FROM nodes ORDER BY name", "listing nodes", [&](Statement& s) {
        return ParseBlob(s, 1, nodes.emplace_back()) ? absl::OkStatus()
                                                     : ParseError("node", std::string(s.Text(0)));
      });
  if (!status.ok()) return status;
  return nodes;
}

absl::StatusOr<std::string> SqliteStore::GetMeta(const std::string& key) {
  absl::MutexLock lock(&reader_mu_);
  absl::StatusOr<Statement*> stmt = reader_->Prepare("SELECT value FROM meta WHERE key = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, key);
  absl::StatusOr<bool> row = (*stmt)->Step("reading metadata");
  std::string value = row.ok() && *row ? std::string((*stmt)->Blob(0)) : "";
  (*stmt)->Reset();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(absl::StrCat("metadata key '", key, "' not found"));
  return value;
}

absl::Status SqliteStore::ReadLiveTasks(StoreSnapshot& snapshot) {
  std::unordered_map<uint64_t, v1::JobRecord*> by_id;
  by_id.reserve(snapshot.jobs.size());
  for (v1::JobRecord& job : snapshot.jobs) by_id[job.id()] = &job;
  // Tasks in rowid order keep each job's tasks in the order they were written.
  std::string sql = absl::StrCat(
      "SELECT t.job_id, t.record FROM tasks t WHERE t.job_id IN "
      "(SELECT id FROM jobs WHERE state IN (",
      LiveStatesSql(), ")) ORDER BY t.rowid");
  return EachRow(*reader_, sql, "loading tasks", [&](Statement& s) {
    auto it = by_id.find(static_cast<uint64_t>(s.Int(0)));
    if (it == by_id.end()) return absl::OkStatus();
    return ParseBlob(s, 1, *it->second->add_tasks())
               ? absl::OkStatus()
               : ParseError("a task of job", absl::StrCat(s.Int(0)));
  });
}

absl::Status SqliteStore::ReadNodesAndMeta(StoreSnapshot& snapshot) {
  absl::Status status = EachRow(*reader_, "SELECT name, record FROM nodes ORDER BY name",
                                "loading nodes", [&](Statement& s) {
                                  return ParseBlob(s, 1, snapshot.nodes.emplace_back())
                                             ? absl::OkStatus()
                                             : ParseError("node", std::string(s.Text(0)));
                                });
  if (!status.ok()) return status;
  status = EachRow(*reader_, "SELECT key, value FROM meta", "loading metadata", [&](Statement& s) {
    snapshot.meta[std::string(s.Text(0))] = std::string(s.Blob(1));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  absl::StatusOr<int64_t> max_id = reader_->QueryInt("SELECT max(id) FROM jobs", "loading");
  if (!max_id.ok()) return max_id.status();
  snapshot.max_job_id = static_cast<uint64_t>(*max_id);
  return absl::OkStatus();
}

absl::StatusOr<StoreSnapshot> SqliteStore::ReadSnapshot() {
  if (absl::Status s = reader_->Exec("BEGIN", "starting a read"); !s.ok()) return s;
  StoreSnapshot snapshot;
  std::string sql = absl::StrCat("SELECT id, record FROM jobs WHERE state IN (", LiveStatesSql(),
                                 ") ORDER BY id");
  absl::Status status = EachRow(*reader_, sql, "loading jobs", [&](Statement& s) {
    return ParseBlob(s, 1, snapshot.jobs.emplace_back())
               ? absl::OkStatus()
               : ParseError("job", absl::StrCat(s.Int(0)));
  });
  if (status.ok()) status = ReadLiveTasks(snapshot);
  if (status.ok()) status = ReadNodesAndMeta(snapshot);
  reader_->EndRead();
  if (!status.ok()) return status;
  return snapshot;
}

absl::StatusOr<StoreSnapshot> SqliteStore::LoadAll() {
  absl::MutexLock lock(&reader_mu_);
  return ReadSnapshot();
}

std::vector<std::string> SqliteStore::FindOrphans() {
  std::vector<std::string> problems;
  absl::Status status = EachRow(
      *reader_,
      "SELECT t.job_id, t.role, t.idx FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id "
      "WHERE j.id IS NULL LIMIT 100",
      "checking tasks", [&](Statement& s) {
        problems.push_back(absl::StrCat("task ", s.Text(1), "/", s.Int(2), " belongs to job ",
                                        s.Int(0), ", which does not exist"));
        return absl::OkStatus();
      });
  if (status.ok()) {
    status = EachRow(*reader_,
                     "SELECT e.job_id, count(*) FROM events e LEFT JOIN jobs j ON j.id = e.job_id "
                     "WHERE j.id IS NULL GROUP BY e.job_id LIMIT 100",
                     "checking events", [&](Statement& s) {
                       problems.push_back(absl::StrCat(s.Int(1), " event(s) belong to job ",
                                                       s.Int(0), ", which does not exist"));
                       return absl::OkStatus();
                     });
  }
  if (!status.ok()) problems.push_back(std::string(status.message()));
  return problems;
}

std::vector<std::string> SqliteStore::FindBadRecords() {
  std::vector<std::string> problems;
  auto note = [&](std::string problem) {
    problems.push_back(std::move(problem));
    return problems.size() < 100 ? absl::OkStatus() : absl::CancelledError("enough");
  };
  absl::Status status = EachRow(
      *reader_, "SELECT id, name, state, record FROM jobs", "checking jobs", [&](Statement& s) {
        v1::JobRecord job;
        if (!ParseBlob(s, 3, job))
          return note(absl::StrCat("job ", s.Int(0), ": record does not parse"));
        if (static_cast<int64_t>(job.id()) != s.Int(0) || job.name() != s.Text(1) ||
            job.state() != s.Int(2)) {
          return note(absl::StrCat("job ", s.Int(0), ": record disagrees with its columns"));
        }
        return absl::OkStatus();
      });
  if (status.ok()) {
    status = EachRow(*reader_, "SELECT job_id, role, idx, node, state, record FROM tasks",
                     "checking tasks", [&](Statement& s) {
                       v1::TaskRecord task;
                       std::string name =
                           absl::StrCat("task of job ", s.Int(0), " ", s.Text(1), "/", s.Int(2));
                       if (!ParseBlob(s, 5, task)) return note(name + ": record does not parse");
                       if (task.role() != s.Text(1) || task.index() != s.Int(2) ||
                           task.node() != s.Text(3) || task.state() != s.Int(4)) {
                         return note(name + ": record disagrees with its columns");
                       }
                       return absl::OkStatus();
                     });
  }
  if (status.ok()) {
    status =
        EachRow(*reader_, "SELECT name, record FROM nodes", "checking nodes", [&](Statement& s) {
          v1::NodeRecord node;
          if (!ParseBlob(s, 1, node) || node.info().name() != s.Text(0)) {
            return note(absl::StrCat("node ", s.Text(0), ": record is bad"));
          }
          return absl::OkStatus();
        });
  }
  if (!status.ok() && !absl::IsCancelled(status)) problems.push_back(std::string(status.message()));
  return problems;
}

absl::Status SqliteStore::CheckIntegrity() {
  absl::MutexLock lock(&reader_mu_);
  std::vector<std::string> problems;
  absl::Status status =
      EachRow(*reader_, "PRAGMA integrity_check", "checking the file", [&](Statement& s) {
        std::string line(s.Text(0));
        if (line != "ok") problems.push_back("sqlite: " + line);
        return absl::OkStatus();
      });
  if (!status.ok()) problems.push_back(std::string(status.message()));
  if (!problems.empty())
    return store_checks::ProblemsToStatus(absl::StrCat("store ", path_), problems);
  std::vector<std::string> orphans = FindOrphans();
  problems.insert(problems.end(), orphans.begin(), orphans.end());
  std::vector<std::string> bad = FindBadRecords();
  problems.insert(problems.end(), bad.begin(), bad.end());
  absl::StatusOr<StoreSnapshot> snapshot = ReadSnapshot();
  if (!snapshot.ok()) {
    problems.push_back(std::string(snapshot.status().message()));
  } else {
    std::vector<std::string> conflicts = store_checks::FindAllocationConflicts(snapshot->jobs);
    problems.insert(problems.end(), conflicts.begin(), conflicts.end());
  }
  return store_checks::ProblemsToStatus(absl::StrCat("store ", path_), problems);
}

}  // namespace trainyard
