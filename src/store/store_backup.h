// A store's whole content as one file, and back: `trainyard admin backup`
// and `restore` (docs/deploy.md, "Backups"). Store-agnostic: taken from
// SQLite or etcd, restored into either (so it also moves a cluster from one
// to the other). The file: a header line, then records, each a kind byte,
// a varint length and that many bytes: 'j' a JobRecord with its tasks, 'e'
// a JobEventRecord, 'n' a NodeRecord, 'm' a metadata key, NUL, its value;
// and 'z' at the end with the counts and a checksum (FNV-1a) of the records
// before it, so a file cut short or altered by accident is refused.
// Written 0600 (job specs hold sealed secrets) under a new name of its own,
// then renamed over FILE, so a reader never sees half a file.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "store/state_store.h"

namespace trainyard {

struct BackupCounts {
  int64_t jobs = 0;
  int64_t tasks = 0;
  int64_t events = 0;
  int64_t nodes = 0;
  int64_t meta = 0;
};

// Writes every job (with its tasks and events), node and metadata value of
// `from` to `path`. A store in use may be backed up: each job is as of one
// read; events appended meanwhile may be in the file or not.
absl::StatusOr<BackupCounts> WriteBackup(StateStore& from, const std::string& path);

// Writes the file's records into `to`, which must hold no job, node or
// metadata (FailedPrecondition otherwise: nothing is written). Job ids,
// names, states and tasks are kept; each job's events keep their order.
// A file that does not parse, or ends before its counts, is refused
// (DataLoss) before anything is written.
absl::StatusOr<BackupCounts> RestoreBackup(const std::string& path, StateStore& to);

}  // namespace trainyard
