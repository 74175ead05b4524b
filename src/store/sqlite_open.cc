// SqliteStateStore::Open: checks that the data dir is ours (or empty), takes
// the data dir's lock so two servers never share one store, opens the writer
// and reader connections, applies the durability settings and brings the
// schema up to date.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "store/sqlite_schema.h"
#include "store/sqlite_store_impl.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

constexpr char kLockFileName[] = "state.lock";

bool IsOurFile(const std::string& name) {
  static const std::set<std::string> kOurs = {
      SqliteStateStore::kFileName, std::string(SqliteStateStore::kFileName) + "-wal",
      std::string(SqliteStateStore::kFileName) + "-shm",
      std::string(SqliteStateStore::kFileName) + "-journal", kLockFileName,
      // The server's security files, which may come first (`trainyard up` and
      // `token create --data-dir` issue the first admin token before the
      // server starts): src/security/tokens.cc, server_security.cc.
      "tokens", "tokens.lock", "job-secret", "admin-client.yaml"};
  return kOurs.contains(name);
}

// Returns OK when data_dir may hold a store: it exists (or was created) and,
// if it has no store yet, holds nothing that is not ours.
absl::Status CheckDataDir(const std::string& data_dir, const SqliteStoreOptions& options) {
  std::error_code ec;
  bool can_create = options.create_if_missing && !options.read_only;
  if (!fs::exists(data_dir, ec)) {
    if (!can_create) {
      return absl::NotFoundError(absl::StrCat("data dir ", data_dir, " does not exist"));
    }
    if (!fs::create_directories(data_dir, ec) && ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create data dir ", data_dir, ": ", ec.message()));
    }
  }
  if (!fs::is_directory(data_dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", data_dir, " exists but is not a directory"));
  }
  fs::path db = fs::path(data_dir) / SqliteStateStore::kFileName;
  if (fs::exists(db, ec)) return absl::OkStatus();
  if (!can_create) {
    return absl::NotFoundError(absl::StrCat("no Trainyard store in ", data_dir, " (no ",
                                            SqliteStateStore::kFileName, ")"));
  }
  if (options.allow_foreign_files) return absl::OkStatus();
  for (const fs::directory_entry& entry : fs::directory_iterator(data_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!IsOurFile(name)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data dir ", data_dir, " holds '", name, "' but no Trainyard store (",
          SqliteStateStore::kFileName,
          "); refusing to create a store among foreign files: give an empty or new --data-dir"));
    }
  }
  return ec ? absl::FailedPreconditionError(
                  absl::StrCat("cannot list data dir ", data_dir, ": ", ec.message()))
            : absl::OkStatus();
}

// Returns the fd of the data dir's lock file, held exclusively.
absl::StatusOr<int> LockDataDir(const std::string& data_dir) {
  std::string path = (fs::path(data_dir) / kLockFileName).string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open lock file ", path, ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data dir ", data_dir, " is in use by another trainyard server (", path, " is locked)"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
  }
  return fd;
}

const char* SyncPragma(StoreSync sync) {
  switch (sync) {
    case StoreSync::kFull:
      return "PRAGMA synchronous = FULL";
    case StoreSync::kNormal:
      return "PRAGMA synchronous = NORMAL";
    case StoreSync::kOff:
      return "PRAGMA synchronous = OFF";
  }
  return "PRAGMA synchronous = FULL";
}

// Sets up the writer connection: WAL, durability, size limit, schema.
absl::Status PrepareWriter(sqlite::Database& db, const SqliteStoreOptions& options) {
  if (absl::Status s = db.Exec("PRAGMA busy_timeout = 5000", "configuring"); !s.ok()) return s;
  // The schema check reads the header first, so a foreign or torn file is
  // reported as such rather than as a failure to switch journal modes.
  absl::Status schema = sqlite_schema::PrepareSchema(db, sqlite_schema::Migrations(), false);
  if (!schema.ok()) return schema;
  if (absl::Status s = db.Exec("PRAGMA journal_mode = WAL", "switching to WAL"); !s.ok()) {
    return s;
  }
  if (absl::Status s = db.Exec(SyncPragma(options.sync), "configuring"); !s.ok()) return s;
  if (options.max_size_bytes_for_test > 0) {
    absl::StatusOr<int64_t> page = db.QueryInt("PRAGMA page_size", "configuring");
    if (!page.ok()) return page.status();
    int64_t pages = std::max<int64_t>(1, options.max_size_bytes_for_test / *page);
    std::string sql = absl::StrCat("PRAGMA max_page_count = ", pages);
    if (absl::Status s = db.Exec(sql, "configuring"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status QuickCheck(sqlite::Database& db) {
  absl::StatusOr<sqlite::Statement*> stmt = db.Prepare("PRAGMA quick_check");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step("checking the store");
  if (!row.ok()) return row.status();
  std::string first = *row ? std::string((*stmt)->Text(0)) : "ok";
  (*stmt)->Reset();
  if (first == "ok") return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("store ", db.path(), " is corrupt (", first,
                                          "); run `trainyard server --check-store`"));
}

absl::StatusOr<StateStorePtr> OpenLocked(const std::string& path, const SqliteStoreOptions& options,
                                         int lock_fd) {
  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  absl::StatusOr<std::unique_ptr<sqlite::Database>> first =
      sqlite::Database::Open(path, flags, options.vfs_for_test);
  if (!first.ok()) return first.status();
  if (options.read_only) {
    absl::Status s = sqlite_schema::PrepareSchema(**first, sqlite_schema::Migrations(), true);
    if (s.ok() && options.verify_on_open) s = QuickCheck(**first);
    if (!s.ok()) return s;
    return StateStorePtr(new SqliteStore(path, options, lock_fd, nullptr, std::move(*first)));
  }
  absl::Status s = PrepareWriter(**first, options);
  if (s.ok() && options.verify_on_open) s = QuickCheck(**first);
  if (!s.ok()) return s;
  absl::StatusOr<std::unique_ptr<sqlite::Database>> reader =
      sqlite::Database::Open(path, SQLITE_OPEN_READONLY, options.vfs_for_test);
  if (!reader.ok()) return reader.status();
  if (absl::Status b = (*reader)->Exec("PRAGMA busy_timeout = 5000", "configuring"); !b.ok()) {
    return b;
  }
  return StateStorePtr(
      new SqliteStore(path, options, lock_fd, std::move(*first), std::move(*reader)));
}

}  // namespace

absl::StatusOr<StateStorePtr> SqliteStateStore::Open(const std::string& data_dir,
                                                     const SqliteStoreOptions& options) {
  if (absl::Status s = CheckDataDir(data_dir, options); !s.ok()) return s;
  int lock_fd = -1;
  if (!options.read_only) {
    absl::StatusOr<int> fd = LockDataDir(data_dir);
    if (!fd.ok()) return fd.status();
    lock_fd = *fd;
  }
  std::string path = (fs::path(data_dir) / kFileName).string();
  absl::StatusOr<StateStorePtr> store = OpenLocked(path, options, lock_fd);
  if (!store.ok() && lock_fd >= 0) ::close(lock_fd);
  return store;
}

}  // namespace trainyard
