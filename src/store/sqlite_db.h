// A thin RAII layer over the SQLite C API for the store: a connection with a
// cache of prepared statements, and the mapping of SQLite result codes to
// Status messages a person can act on (disk full, read-only, corrupt, locked).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainyard::sqlite {

// Returns the Status for SQLite result code `rc` met while doing `what` on the
// store file `path`; `detail` is SQLite's own message and `cause` the errno
// behind an I/O error (EROFS: read-only file system, ENOSPC: full; 0 =
// unknown), which tells those from a failing disk.
absl::Status ToStatus(int rc, absl::string_view detail, absl::string_view what,
                      const std::string& path, int cause = 0);

// One prepared statement. Bind indexes start at 1, column indexes at 0.
class Statement {
 public:
  Statement(sqlite3_stmt* stmt, class Database* db) : stmt_(stmt), db_(db) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void BindInt(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void BindText(int i, absl::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int i, absl::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  // Returns true when a row is ready, false when the statement is done.
  absl::StatusOr<bool> Step(absl::string_view what);
  // Steps until done (for writes).
  absl::Status Run(absl::string_view what);
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  absl::string_view Text(int col);
  absl::string_view Blob(int col);
  // Makes the statement ready for new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* stmt_;
  Database* db_;
};

// One connection. Not thread-safe: each user holds it alone.
class Database {
 public:
  // Opens `path` with SQLITE_OPEN_* `flags` through the VFS named `vfs`
  // (empty = the default).
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path, int flags,
                                                        const std::string& vfs = "");
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows.
  absl::Status Exec(absl::string_view sql, absl::string_view what);
  // Ends a read transaction (begun with Exec("BEGIN", ...)). Its status
  // cannot matter: a read changed nothing, and a COMMIT that failed leaves
  // the transaction open, so this connection's next BEGIN fails with its own
  // error and that read reports it.
  void EndRead();
  // Rolls back the open transaction after a failure the caller reports.
  // Its status cannot matter: SQLite has already rolled back when the
  // failure was one that ends the transaction, and a ROLLBACK that fails
  // leaves it open, so the next BEGIN on this connection fails and says so.
  void RollBackAfterFailure(absl::string_view what);
  // Returns the cached statement for `sql`, reset and ready to bind.
  absl::StatusOr<Statement*> Prepare(const std::string& sql);
  // Runs one cached statement that returns no rows.
  absl::Status Run(const std::string& sql, absl::string_view what);
  // Runs a query that returns one integer (e.g. a PRAGMA).
  absl::StatusOr<int64_t> QueryInt(const std::string& sql, absl::string_view what);
  // Returns the Status for `rc` with this connection's message.
  absl::Status Error(int rc, absl::string_view what);

  sqlite3* raw() { return db_; }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::map<std::string, std::unique_ptr<Statement>> statements_;
};

}  // namespace trainyard::sqlite
