// What only the SQLite store has to prove: durability across close and
// reopen, group commit under many writers, the schema version and its
// migrations, refusing files and data dirs that are not ours, detecting
// corrupt or torn files, and failing writes cleanly on a full or read-only
// store without acknowledging anything that was not kept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "store/fault_vfs.h"
#include "store/sqlite_db.h"
#include "store/sqlite_schema.h"
#include "store/sqlite_state_store.h"
#include "store/store_test_util.h"

namespace trainyard {
namespace {

using store_test::MakeEvent;
using store_test::MakeJob;
using store_test::MakeNode;
using store_test::SameMessage;
using ::testing::HasSubstr;

class SqliteStateStoreTest : public ::testing::Test {
 protected:
  std::string DbPath() const { return dir_.path() + "/state.db"; }

  StateStorePtr OpenOrDie(SqliteStoreOptions options = {}) {
    absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path(), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  static absl::Status Create(StateStore& store, uint64_t id, int tasks = 1) {
    WriteBatch batch;
    batch.CreateJob(MakeJob(id, tasks), MakeEvent(id, "submitted"));
    return store.Commit(std::move(batch));
  }

  // Runs SQL on the closed store file directly, as another program would.
  void RawExec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(DbPath().c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  void FillStore(int jobs) {
    SqliteStoreOptions options;
    options.sync = StoreSync::kOff;
    StateStorePtr store = OpenOrDie(options);
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    for (int i = 1; i <= jobs; ++i) batch.CreateJob(MakeJob(i, 4), MakeEvent(i, "submitted"));
    ASSERT_TRUE(store->Commit(std::move(batch)).ok());
  }

  store_test::TempDir dir_;
};

TEST_F(SqliteStateStoreTest, AcknowledgedWritesSurviveCloseAndReopen) {
  {
    StateStorePtr store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(Create(*store, 1, 2).ok());
    WriteBatch batch;
    batch.AppendEvent(MakeEvent(1, "scheduled"));
    batch.PutNode(MakeNode("n1"));
    batch.PutMeta("next_job_id", "2");
    ASSERT_TRUE(store->Commit(std::move(batch)).ok());
  }
  EXPECT_TRUE(std::filesystem::exists(DbPath()));
  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<v1::JobRecord> job = store->GetJob(1);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(SameMessage(*job, MakeJob(1, 2)));
  EXPECT_EQ(store->ListEvents(1)->size(), 2u);
  EXPECT_TRUE(SameMessage(*store->GetNode("n1"), MakeNode("n1")));
  EXPECT_EQ(*store->GetMeta("next_job_id"), "2");
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
}

TEST_F(SqliteStateStoreTest, EveryAcknowledgedSubmissionOfManyWritersIsThereAfterReopen) {
  constexpr int kThreads = 16;
  constexpr int kJobsPerThread = 25;
  absl::Mutex mu;
  std::set<uint64_t> acked;
  {
    StateStorePtr store = OpenOrDie();  // fsync on: group commit is what makes this quick
    ASSERT_NE(store, nullptr);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kJobsPerThread; ++i) {
          uint64_t id = 1 + t * kJobsPerThread + i;
          if (Create(*store, id).ok()) {
            absl::MutexLock lock(&mu);
            acked.insert(id);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    StoreStats stats = store->Stats();
    EXPECT_EQ(stats.batches_committed, kThreads * kJobsPerThread);
    EXPECT_LE(stats.transactions, stats.batches_committed);
  }
  EXPECT_EQ(acked.size(), static_cast<size_t>(kThreads * kJobsPerThread));
  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<StoreSnapshot> snapshot = store->LoadAll();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  std::set<uint64_t> found;
  for (const v1::JobRecord& job : snapshot->jobs) {
    found.insert(job.id());
    EXPECT_EQ(job.tasks_size(), 1);
  }
  EXPECT_EQ(found, acked);
}

TEST_F(SqliteStateStoreTest, NewerSchemaIsRefusedWithTheVersions) {
  FillStore(1);
  RawExec("UPDATE schema_version SET version = 99");
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path());
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 99, newer than this trainyard "
                                                  "binary knows (1)"));
}

TEST_F(SqliteStateStoreTest, MigrationsBringAnOlderSchemaForward) {
  FillStore(2);
  std::vector<sqlite_schema::Migration> with_v2 = sqlite_schema::Migrations();
  with_v2.push_back({2, "ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;"});
  {
    absl::StatusOr<std::unique_ptr<sqlite::Database>> db =
        sqlite::Database::Open(DbPath(), SQLITE_OPEN_READONLY);
    ASSERT_TRUE(db.ok());
    absl::Status refused = sqlite_schema::PrepareSchema(**db, with_v2, /*read_only=*/true);
    EXPECT_THAT(refused.message(), HasSubstr("schema version 1; this binary needs 2"));
  }
  absl::StatusOr<std::unique_ptr<sqlite::Database>> db =
      sqlite::Database::Open(DbPath(), SQLITE_OPEN_READWRITE);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(sqlite_schema::PrepareSchema(**db, with_v2, false).ok());
  EXPECT_EQ(*sqlite_schema::SchemaVersion(**db), 2);
  EXPECT_EQ(*(*db)->QueryInt("SELECT count(*) FROM jobs WHERE priority = 0", "test"), 2);
  // Running it again is a no-op.
  EXPECT_TRUE(sqlite_schema::PrepareSchema(**db, with_v2, false).ok());
}

TEST_F(SqliteStateStoreTest, ForeignSqliteFileIsRefused) {
  RawExec("CREATE TABLE photos(id INTEGER PRIMARY KEY, data BLOB)");
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path());
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("not a Trainyard store"));
}

TEST_F(SqliteStateStoreTest, DataDirWithForeignFilesIsRefusedUnlessAllowed) {
  std::ofstream(dir_.path() + "/notes.txt") << "hello";
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("holds 'notes.txt' but no Trainyard store"));
  EXPECT_FALSE(std::filesystem::exists(DbPath()));
  SqliteStoreOptions options;
  options.allow_foreign_files = true;
  EXPECT_NE(OpenOrDie(options), nullptr);
}

TEST_F(SqliteStateStoreTest, MissingStoreIsNotCreatedWhenAskedNotTo) {
  SqliteStoreOptions options;
  options.create_if_missing = false;
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path() + "/sub", options);
  EXPECT_TRUE(absl::IsNotFound(store.status())) << store.status();
}

TEST_F(SqliteStateStoreTest, SecondOpenOfTheSameDataDirIsRefused) {
  StateStorePtr first = OpenOrDie();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<StateStorePtr> second = SqliteStateStore::Open(dir_.path());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another trainyard server"));
}

TEST_F(SqliteStateStoreTest, GarbageHeaderIsReportedAsNotADatabase) {
  FillStore(5);
  {
    std::fstream f(DbPath(), std::ios::in | std::ios::out | std::ios::binary);
    f.write("this is not sqlite!", 19);
  }
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path());
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsDataLoss(store.status())) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("is not an SQLite database"));
}

// Overwrites `length` bytes at `offset` of the store file with seeded noise.
void Scribble(const std::string& path, int64_t offset, int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string noise(length, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(noise.data(), length);
}

// Returns the error the store reports for a damaged file: from Open, else
// from CheckIntegrity. Reads in between must not crash.
absl::Status DamageReport(const std::string& dir) {
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir);
  if (!store.ok()) return store.status();
  (void)(*store)->LoadAll();
  (void)(*store)->ListJobs({});
  return (*store)->CheckIntegrity();
}

TEST_F(SqliteStateStoreTest, CorruptPagesAreDetectedAndReportedClearly) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    FillStore(300);
    int64_t size = static_cast<int64_t>(std::filesystem::file_size(DbPath()));
    ASSERT_GT(size, 20 * 4096);
    Scribble(DbPath(), size / 2 + seed * 4096, 3 * 4096, seed);
    absl::Status report = DamageReport(dir_.path());
    EXPECT_TRUE(absl::IsDataLoss(report)) << "seed " << seed << ": " << report;
    EXPECT_THAT(report.message(), HasSubstr(DbPath()));
    std::filesystem::remove(DbPath());
  }
}

TEST_F(SqliteStateStoreTest, TornFileIsDetected) {
  FillStore(300);
  std::filesystem::resize_file(DbPath(), std::filesystem::file_size(DbPath()) / 2);
  absl::Status report = DamageReport(dir_.path());
  EXPECT_TRUE(absl::IsDataLoss(report)) << report;
}

TEST_F(SqliteStateStoreTest, CheckIntegrityFindsOrphansAndUnreadableRecords) {
  FillStore(2);
  RawExec(
      "INSERT INTO tasks(job_id, role, idx, node, state, record) VALUES(99, 'ps', 0, '', 1, x'');"
      "UPDATE jobs SET record = x'ffffffff' WHERE id = 1;"
      "UPDATE jobs SET state = 4 WHERE id = 2;");
  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::Status status = store->CheckIntegrity();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("task ps/0 belongs to job 99, which does not exist"));
  EXPECT_THAT(status.message(), HasSubstr("job 1: record does not parse"));
  EXPECT_THAT(status.message(), HasSubstr("job 2: record disagrees with its columns"));
  absl::Status load = store->LoadAll().status();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(), HasSubstr("the record of job 1 does not parse"));
}

TEST_F(SqliteStateStoreTest, ReadOnlyStoreReadsButRefusesWrites) {
  FillStore(3);
  SqliteStoreOptions options;
  options.read_only = true;
  StateStorePtr store = OpenOrDie(options);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<StoreSnapshot> snapshot = store->LoadAll();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->jobs.size(), 3u);
  EXPECT_TRUE(store->CheckIntegrity().ok());
  absl::Status write = Create(*store, 10);
  EXPECT_TRUE(absl::IsFailedPrecondition(write)) << write;
  EXPECT_THAT(write.message(), HasSubstr("read-only; nothing was written"));
}

TEST_F(SqliteStateStoreTest, FullDiskFailsWritesAndAcknowledgesOnlyWhatWasKept) {
  std::set<uint64_t> acked;
  absl::Status failure;
  {
    SqliteStoreOptions options;
    options.max_size_bytes_for_test = 96 * 1024;
    StateStorePtr store = OpenOrDie(options);
    ASSERT_NE(store, nullptr);
    absl::Mutex mu;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 1000; ++i) {
          uint64_t id = 1 + t * 1000 + i;
          absl::Status s = Create(*store, id, 8);
          absl::MutexLock lock(&mu);
          if (s.ok()) {
            acked.insert(id);
          } else {
            failure = s;
            return;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_TRUE(absl::IsResourceExhausted(failure)) << failure;
  EXPECT_THAT(failure.message(), HasSubstr("disk full"));
  EXPECT_THAT(failure.message(), HasSubstr("nothing of this write was kept"));
  ASSERT_FALSE(acked.empty());
  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<StoreSnapshot> snapshot = store->LoadAll();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  std::set<uint64_t> found;
  for (const v1::JobRecord& job : snapshot->jobs) found.insert(job.id());
  EXPECT_EQ(found, acked);
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
}

// The child side of the crash test: submits jobs from 4 threads and writes
// each id to `fd` once its Commit has returned OK. Never returns.
[[noreturn]] void SubmitUntilKilled(const std::string& dir, int fd) {
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir);
  if (!store.ok()) _exit(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t id = 1 + t; id < 1000000; id += 4) {
        WriteBatch batch;
        batch.CreateJob(MakeJob(id), MakeEvent(id, "submitted"));
        if (!(*store)->Commit(std::move(batch)).ok()) _exit(3);
        if (write(fd, &id, sizeof(id)) != sizeof(id)) _exit(4);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  _exit(0);
}

TEST_F(SqliteStateStoreTest, EveryAcknowledgedSubmissionSurvivesSigkill) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    SubmitUntilKilled(dir_.path(), fds[1]);
  }
  close(fds[1]);
  std::set<uint64_t> acked;
  uint64_t id = 0;
  while (acked.size() < 300 && read(fds[0], &id, sizeof(id)) == sizeof(id)) acked.insert(id);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus)) << "child exited early with " << WEXITSTATUS(wstatus);
  while (read(fds[0], &id, sizeof(id)) == sizeof(id)) acked.insert(id);
  close(fds[0]);
  ASSERT_GE(acked.size(), 300u);

  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<StoreSnapshot> snapshot = store->LoadAll();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  std::set<uint64_t> found;
  for (const v1::JobRecord& job : snapshot->jobs) {
    found.insert(job.id());
    EXPECT_EQ(job.tasks_size(), 1) << "job " << job.id() << " is half-written";
  }
  for (uint64_t acked_id : acked) EXPECT_TRUE(found.contains(acked_id)) << "lost job " << acked_id;
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
}

// Opens a store whose file goes through the fault-injecting VFS.
StateStorePtr OpenFaulty(const std::string& dir) {
  SqliteStoreOptions options;
  options.vfs_for_test = store_test::FaultVfsName();
  absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST_F(SqliteStateStoreTest, IoErrorFailsTheWriteAndEveryLaterOneUntilRestart) {
  {
    StateStorePtr store = OpenFaulty(dir_.path());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(Create(*store, 1).ok());
    store_test::SetFault(store_test::Fault::kWriteFails);
    absl::Status failed = Create(*store, 2);
    store_test::SetFault(store_test::Fault::kNone);
    EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
    EXPECT_THAT(failed.message(), HasSubstr("I/O error"));
    absl::Status later = Create(*store, 3);
    EXPECT_TRUE(absl::IsUnavailable(later)) << later;
    EXPECT_THAT(later.message(), HasSubstr("refuses further writes: restart the server"));
    EXPECT_TRUE(store->GetJob(1).ok());  // reads still work
  }
  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->GetJob(1).ok());
  EXPECT_TRUE(absl::IsNotFound(store->GetJob(2).status()));
  EXPECT_TRUE(absl::IsNotFound(store->GetJob(3).status()));
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
}

TEST_F(SqliteStateStoreTest, IoErrorSaysRestartTheServerFromTheFirstRefusal) {
  StateStorePtr store = OpenFaulty(dir_.path());
  ASSERT_NE(store, nullptr);
  store_test::SetFault(store_test::Fault::kWriteFails);
  absl::Status failed = Create(*store, 1);
  store_test::SetFault(store_test::Fault::kNone);
  EXPECT_THAT(failed.message(), HasSubstr("refuses further writes: restart the server"));
  EXPECT_EQ(Create(*store, 2), failed);
}

TEST(SqliteErrorTest, IoErrorOnAReadOnlyOrFullFileSystemSaysSo) {
  absl::Status ro = sqlite::ToStatus(SQLITE_IOERR_WRITE, "disk I/O error", "committing", "/d/state.db", EROFS);
  EXPECT_TRUE(absl::IsUnavailable(ro)) << ro;
  EXPECT_THAT(ro.message(), HasSubstr("store /d/state.db: the data dir's file system is read-only"));
  EXPECT_THAT(ro.message(), HasSubstr("make the data dir writable"));
  absl::Status full = sqlite::ToStatus(SQLITE_IOERR_WRITE, "disk I/O error", "committing", "/d/state.db", ENOSPC);
  EXPECT_THAT(full.message(), HasSubstr("disk full"));
  EXPECT_THAT(full.message(), HasSubstr("free space in the data dir"));
  absl::Status other = sqlite::ToStatus(SQLITE_IOERR_WRITE, "disk I/O error", "committing", "/d/state.db");
  EXPECT_THAT(other.message(), HasSubstr("I/O error"));
}

TEST_F(SqliteStateStoreTest, FailedFsyncIsNeverAcknowledged) {
  {
    StateStorePtr store = OpenFaulty(dir_.path());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(Create(*store, 1).ok());
    store_test::SetFault(store_test::Fault::kSyncFails);
    absl::Status failed = Create(*store, 2);
    store_test::SetFault(store_test::Fault::kNone);
    EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  }
  StateStorePtr store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->GetJob(1).ok());
}

TEST_F(SqliteStateStoreTest, DiskFullAtRunTimeFailsOnlyWhileFull) {
  StateStorePtr store = OpenFaulty(dir_.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Create(*store, 1).ok());
  store_test::SetFault(store_test::Fault::kDiskFull);
  absl::Status failed = Create(*store, 2);
  store_test::SetFault(store_test::Fault::kNone);
  EXPECT_TRUE(absl::IsResourceExhausted(failed)) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("disk full"));
  EXPECT_TRUE(absl::IsNotFound(store->GetJob(2).status()));
  EXPECT_TRUE(Create(*store, 3).ok());
  EXPECT_TRUE(store->GetJob(3).ok());
}

}  // namespace
}  // namespace trainyard
