// The store's SQLite schema and its migrations. Version 1 is the first
// schema; each later version is one Migration appended to the list, applied
// in its own transaction when an older file is opened read-write. The file is
// marked with a Trainyard application id so a foreign SQLite file is refused.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "store/sqlite_db.h"

namespace trainyard::sqlite_schema {

// "TRAY": PRAGMA application_id of every Trainyard store file.
inline constexpr int64_t kApplicationId = 0x54524159;

// One step of the schema: the SQL that brings version `version - 1` to
// `version`.
struct Migration {
  int version;
  const char* sql;
};

// Returns the migrations this binary knows, by increasing version, starting
// at 1.
const std::vector<Migration>& Migrations();

// Checks that `db` is a Trainyard store (or empty) and brings it to the last
// version of `migrations`. Returns FailedPrecondition for a foreign file, a
// newer schema, or a read-only store that needs migrating; DataLoss for a
// file that is not a database or lacks its version.
absl::Status PrepareSchema(sqlite::Database& db, const std::vector<Migration>& migrations,
                           bool read_only);

// Returns the schema version stored in `db`.
absl::StatusOr<int64_t> SchemaVersion(sqlite::Database& db);

}  // namespace trainyard::sqlite_schema
