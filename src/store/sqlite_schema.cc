// Schema v1 of the store and the migration runner.
#include "store/sqlite_schema.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::sqlite_schema {
namespace {

// Jobs and nodes keep their protobuf record as a BLOB plus the columns that
// queries filter on; tasks keep insertion order through their rowid.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version VALUES(0);
CREATE TABLE meta(key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  state INTEGER NOT NULL,
  queue TEXT NOT NULL,
  user TEXT NOT NULL,
  record BLOB NOT NULL);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE tasks(
  job_id INTEGER NOT NULL,
  role TEXT NOT NULL,
  idx INTEGER NOT NULL,
  node TEXT NOT NULL,
  state INTEGER NOT NULL,
  record BLOB NOT NULL);
CREATE UNIQUE INDEX tasks_by_job ON tasks(job_id, role, idx);
CREATE TABLE events(
  seq INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  text TEXT NOT NULL);
CREATE INDEX events_by_job ON events(job_id, seq);
CREATE TABLE nodes(name TEXT PRIMARY KEY, state INTEGER NOT NULL, record BLOB NOT NULL)
  WITHOUT ROWID;
)sql";

absl::Status Migrate(sqlite::Database& db, const Migration& m) {
  std::string sql = absl::StrCat("BEGIN IMMEDIATE;", m.sql,
                                 absl::StrFormat("PRAGMA application_id = %d;", kApplicationId),
                                 "UPDATE schema_version SET version = ", m.version, ";COMMIT;");
  absl::Status status = db.Exec(sql, absl::StrCat("migrating the schema to version ", m.version));
  if (!status.ok()) db.RollBackAfterFailure("rolling back a failed migration");
  return status;
}

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kAll = {{1, kSchemaV1}};
  return kAll;
}

absl::StatusOr<int64_t> SchemaVersion(sqlite::Database& db) {
  absl::StatusOr<int64_t> version =
      db.QueryInt("SELECT version FROM schema_version", "reading the schema version");
  if (!version.ok() && !absl::IsDataLoss(version.status())) {
    return absl::DataLossError(absl::StrCat("store ", db.path(),
                                            " has a Trainyard id but no readable schema version (",
                                            version.status().message(), ")"));
  }
  return version;
}

absl::Status PrepareSchema(sqlite::Database& db, const std::vector<Migration>& migrations,
                           bool read_only) {
  absl::StatusOr<int64_t> app_id = db.QueryInt("PRAGMA application_id", "reading the file header");
  if (!app_id.ok()) return app_id.status();
  absl::StatusOr<int64_t> tables =
      db.QueryInt("SELECT count(*) FROM sqlite_master", "reading the schema");
  if (!tables.ok()) return tables.status();
  int64_t version = 0;
  if (*app_id != kApplicationId) {
    if (*app_id != 0 || *tables != 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s is an SQLite database but not a Trainyard store (application_id 0x%x, %d tables): "
          "point --data-dir at a Trainyard data dir or at an empty one",
          db.path(), *app_id, *tables));
    }
  } else {
    absl::StatusOr<int64_t> stored = SchemaVersion(db);
    if (!stored.ok()) return stored.status();
    version = *stored;
  }
  int64_t latest = migrations.empty() ? 0 : migrations.back().version;
  if (version > latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store ", db.path(), " has schema version ", version,
        ", newer than this trainyard binary knows (", latest,
        "): run the trainyard version that wrote it, or a newer one"));
  }
  if (version < latest && read_only) {
    return absl::FailedPreconditionError(
        absl::StrCat("store ", db.path(), " has schema version ", version, "; this binary needs ",
                     latest, ": open it read-write once to migrate it"));
  }
  for (const Migration& m : migrations) {
    if (m.version <= version) continue;
    if (absl::Status s = Migrate(db, m); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace trainyard::sqlite_schema
