// StateStore kept in SQLite: one file, <data_dir>/state.db, in WAL mode. A
// committer thread groups the batches of concurrent callers into one
// transaction, so one fsync acknowledges many submissions. The file carries a
// Trainyard application id and a schema version; Open migrates an older
// schema forward and refuses a newer one or a file that is not ours.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "store/state_store.h"

namespace trainyard {

// How hard a commit waits for the disk.
enum class StoreSync {
  kFull,    // fsync on every commit: an acknowledged write survives power loss
  kNormal,  // WAL fsync at checkpoints only: survives a process crash, not power loss
  kOff,     // no fsync (tests and benchmarks that measure something else)
};

struct SqliteStoreOptions {
  StoreSync sync = StoreSync::kFull;
  // Group concurrent batches into one transaction. false = one transaction per
  // batch (the baseline the benchmark compares with).
  bool group_commit = true;
  // At most this many batches in one group transaction.
  int max_group_batches = 4096;
  // After a transaction, the next one starts no sooner than this (unless
  // max_group_batches are waiting): under a steady stream of small batches
  // the store commits a few hundred larger transactions a second instead of
  // one per batch, each costing a WAL write of every page it touched and an
  // fsync. An idle store commits at once, so a lone write waits for nothing.
  absl::Duration commit_interval = absl::Milliseconds(2);
  // Open without write access (e.g. `trainyard server --check-store`); every
  // write fails with FailedPrecondition.
  bool read_only = false;
  // Create <data_dir> and a fresh store when there is none. Refused anyway
  // when <data_dir> holds files other than ours, unless allow_foreign_files.
  bool create_if_missing = true;
  bool allow_foreign_files = false;
  // Run SQLite's quick_check while opening (slower start, earlier detection).
  bool verify_on_open = false;
  // Limits the file to about this many bytes (0 = no limit) so tests can see
  // how a full disk is reported.
  int64_t max_size_bytes_for_test = 0;
  // The name of a registered SQLite VFS to open the file through (tests
  // inject I/O failures this way); empty = SQLite's default.
  std::string vfs_for_test;
};

class SqliteStateStore {
 public:
  // The store's file name inside data_dir.
  static constexpr char kFileName[] = "state.db";
  // The schema version this binary writes; older files are migrated to it.
  static constexpr int kSchemaVersion = 1;

  // Opens (or creates) the store under data_dir. Returns FailedPrecondition
  // for a data dir or file that is not a Trainyard store, or a schema newer
  // than kSchemaVersion; DataLoss for a corrupt file; NotFound when there is
  // no store and create_if_missing is false or read_only is set.
  static absl::StatusOr<StateStorePtr> Open(const std::string& data_dir,
                                            const SqliteStoreOptions& options = {});
};

}  // namespace trainyard
