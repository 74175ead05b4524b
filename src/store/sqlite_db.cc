// SQLite connection wrapper and error mapping for the store.
#include "store/sqlite_db.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace trainyard::sqlite {

absl::Status ToStatus(int rc, absl::string_view detail, absl::string_view what,
                      const std::string& path, int cause) {
  std::string where = absl::StrCat(" (", detail, ") while ", what);
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(absl::StrCat(
          "store ", path, ": disk full", where,
          "; nothing of this write was kept: free space in the data dir and retry"));
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(absl::StrCat(
          "store ", path, " is read-only", where,
          "; nothing of this write was kept: make the data dir writable"));
    case SQLITE_CORRUPT:
      return absl::DataLossError(
          absl::StrCat("store ", path, " is corrupt", where,
                       "; run `trainyard server --check-store` and restore it from a backup"));
    case SQLITE_NOTADB:
      return absl::DataLossError(absl::StrCat(
          path, " is not an SQLite database (a corrupt or torn header, or a file that is not ours)",
          where));
    case SQLITE_IOERR:
      // A file system remounted read-only under open files, or one with no
      // room for a write SQLite cannot report as SQLITE_FULL.
      if (cause == EROFS) {
        return absl::UnavailableError(absl::StrCat(
            "store ", path, ": the data dir's file system is read-only", where,
            "; nothing of this write was kept: make the data dir writable (remount it read-write)"));
      }
      if (cause == ENOSPC) {
        return absl::UnavailableError(absl::StrCat("store ", path, ": disk full", where,
                                                   "; nothing of this write was kept: free space in the data dir"));
      }
      return absl::UnavailableError(absl::StrCat("store ", path, ": I/O error", where,
                                                 "; check the disk of the data dir"));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(
          absl::StrCat("store ", path, " is locked by another process", where));
    case SQLITE_CANTOPEN:
      return absl::FailedPreconditionError(absl::StrCat("cannot open store ", path, where));
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(absl::StrCat("store ", path, ": constraint failed", where));
    default:
      return absl::InternalError(
          absl::StrCat("store ", path, ": SQLite error ", rc, where));
  }
}

absl::StatusOr<bool> Statement::Step(absl::string_view what) {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, what);
}

absl::Status Statement::Run(absl::string_view what) {
  while (true) {
    absl::StatusOr<bool> row = Step(what);
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

absl::string_view Statement::Text(int col) {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
}

absl::string_view Statement::Blob(int col) {
  const void* p = sqlite3_column_blob(stmt_, col);
  return {static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path, int flags,
                                                         const std::string& vfs) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX,
                           vfs.empty() ? nullptr : vfs.c_str());
  if (rc != SQLITE_OK) {
    absl::Status status = ToStatus(rc, db ? sqlite3_errmsg(db) : "out of memory", "opening", path);
    sqlite3_close(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Database>(new Database(db, path));
}

Database::~Database() {
  statements_.clear();
  sqlite3_close(db_);
}

absl::Status Database::Exec(absl::string_view sql, absl::string_view what) {
  std::string text(sql);
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : Error(rc, what);
}

// A read's transaction holds no writes: a COMMIT that fails loses nothing,
// and the next transaction's BEGIN reports a database that is still in one.
void Database::EndRead() { (void)Exec("COMMIT", "ending a read"); }

void Database::RollBackAfterFailure(absl::string_view what) {
  // The caller reports the failure that led here; a rollback that fails
  // too leaves the transaction open, and the next BEGIN reports it.
  if (!sqlite3_get_autocommit(db_)) (void)Exec("ROLLBACK", what);
}

absl::StatusOr<Statement*> Database::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    it->second->Reset();
    return it->second.get();
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, absl::StrCat("preparing `", sql, "`"));
  auto owned = std::make_unique<Statement>(stmt, this);
  Statement* raw = owned.get();
  statements_.emplace(sql, std::move(owned));
  return raw;
}

absl::Status Database::Run(const std::string& sql, absl::string_view what) {
  absl::StatusOr<Statement*> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::Status status = (*stmt)->Run(what);
  (*stmt)->Reset();
  return status;
}

absl::StatusOr<int64_t> Database::QueryInt(const std::string& sql, absl::string_view what) {
  absl::StatusOr<Statement*> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step(what);
  if (!row.ok()) return row.status();
  int64_t value = *row ? (*stmt)->Int(0) : 0;
  (*stmt)->Reset();
  return value;
}

namespace {

// The cause of an I/O error on the file system holding `path`, as an errno:
// EROFS when it is read-only (also ext4's emergency read-only after a disk
// error, which statvfs does not show), ENOSPC when it has no room, else 0.
// Found by writing a byte to an unnamed file beside `path` (O_TMPFILE: it
// leaves nothing behind), because SQLite's errno is gone by the time the
// error reaches us.
int FileSystemCause(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    if (::pwrite(fd, "x", 1, 0) != 1 || ::fsync(fd) != 0) err = errno;
    ::close(fd);
  }
  if (err == EROFS) return EROFS;
  if (err == ENOSPC || err == EDQUOT) return ENOSPC;
  return 0;
}

}  // namespace

absl::Status Database::Error(int rc, absl::string_view what) {
  int cause = (rc & 0xff) == SQLITE_IOERR ? FileSystemCause(path_) : 0;
  return ToStatus(rc, sqlite3_errmsg(db_), what, path_, cause);
}

}  // namespace trainyard::sqlite
