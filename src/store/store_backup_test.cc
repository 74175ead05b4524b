#include "store/store_backup.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "store/memory_state_store.h"
#include "store/sqlite_state_store.h"
#include "store/store_test_util.h"

namespace trainyard {
namespace {

using store_test::MakeEvent;
using store_test::MakeJob;
using store_test::MakeNode;
using store_test::SameMessage;

class StoreBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A live job of 70 tasks (two chunks), a finished one, one purged (its
    // id is never reused), events of several jobs interleaved, nodes, meta.
    WriteBatch a;
    a.CreateJob(MakeJob(1, 70), MakeEvent(1, "submitted", 1000));
    v1::JobRecord done = MakeJob(2, 2);
    done.set_state(v1::JOB_SUCCEEDED);
    a.CreateJob(done, MakeEvent(2, "submitted", 1001));
    a.CreateJob(MakeJob(3), MakeEvent(3, "submitted", 1002));
    a.AppendEvent(MakeEvent(1, "placed", 1003));
    a.AppendEvent(MakeEvent(2, "ended", 1004));
    a.AppendEvent(MakeEvent(1, "running", 1005));
    a.PutNode(MakeNode("n1"));
    a.PutNode(MakeNode("n2", v1::NODE_LOST));
    a.PutMeta("next_job_id", "4");
    a.PutMeta("secret", std::string("a\0b", 3));
    ASSERT_TRUE(from_.Commit(std::move(a)).ok());
    WriteBatch purge;
    purge.PurgeJob(3);
    ASSERT_TRUE(from_.Commit(std::move(purge)).ok());
    path_ = dir_.path() + "/backup";
  }

  StateStorePtr NewSqlite(const std::string& name) {
    SqliteStoreOptions options;
    options.sync = StoreSync::kOff;
    absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path() + "/" + name, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  store_test::TempDir dir_;
  MemoryStateStore from_;
  std::string path_;
};

TEST_F(StoreBackupTest, ARestoredStoreHoldsEveryRecordOfTheBackedUpOne) {
  absl::StatusOr<BackupCounts> wrote = WriteBackup(from_, path_);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_EQ(wrote->jobs, 2);
  EXPECT_EQ(wrote->tasks, 72);
  EXPECT_EQ(wrote->events, 5);
  EXPECT_EQ(wrote->nodes, 2);
  EXPECT_EQ(wrote->meta, 2);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // specs hold sealed secrets

  StateStorePtr to = NewSqlite("restored");
  ASSERT_NE(to, nullptr);
  absl::StatusOr<BackupCounts> read = RestoreBackup(path_, *to);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->jobs, 2);
  EXPECT_EQ(read->events, 5);

  absl::StatusOr<std::vector<v1::JobRecord>> jobs_a = from_.ListJobs({});
  absl::StatusOr<std::vector<v1::JobRecord>> jobs_b = to->ListJobs({});
  ASSERT_TRUE(jobs_a.ok() && jobs_b.ok());
  ASSERT_EQ(jobs_b->size(), 2u);
  for (size_t i = 0; i < jobs_a->size(); ++i) {
    EXPECT_TRUE(SameMessage((*jobs_a)[i], (*jobs_b)[i])) << (*jobs_b)[i].DebugString();
    absl::StatusOr<std::vector<v1::JobEventRecord>> ea = from_.ListEvents((*jobs_a)[i].id());
    absl::StatusOr<std::vector<v1::JobEventRecord>> eb = to->ListEvents((*jobs_a)[i].id());
    ASSERT_TRUE(ea.ok() && eb.ok());
    ASSERT_EQ(ea->size(), eb->size());
    for (size_t e = 0; e < ea->size(); ++e) {
      EXPECT_EQ((*ea)[e].kind(), (*eb)[e].kind());
      EXPECT_EQ((*ea)[e].time_ms(), (*eb)[e].time_ms());
      if (e > 0) {
        EXPECT_GT((*eb)[e].seq(), (*eb)[e - 1].seq());  // their order kept
      }
    }
  }
  absl::StatusOr<StoreSnapshot> sa = from_.LoadAll();
  absl::StatusOr<StoreSnapshot> sb = to->LoadAll();
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->meta, sb->meta);
  ASSERT_EQ(sb->nodes.size(), 2u);
  for (size_t i = 0; i < sa->nodes.size(); ++i) EXPECT_TRUE(SameMessage(sa->nodes[i], sb->nodes[i]));
  ASSERT_TRUE(to->CheckIntegrity().ok());
}

TEST_F(StoreBackupTest, ANonEmptyStoreOrABrokenFileIsRefusedAndNothingIsWritten) {
  ASSERT_TRUE(WriteBackup(from_, path_).ok());
  // Into a store that holds anything: refused, nothing added.
  StateStorePtr used = NewSqlite("used");
  WriteBatch node;
  node.PutNode(MakeNode("other"));
  ASSERT_TRUE(used->Commit(std::move(node)).ok());
  absl::StatusOr<BackupCounts> refused = RestoreBackup(path_, *used);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(used->ListJobs({})->empty());

  std::ifstream in(path_, std::ios::binary);
  std::stringstream whole;
  whole << in.rdbuf();
  std::string bytes = whole.str();
  StateStorePtr fresh = NewSqlite("fresh");
  // A byte of a job's name changed ("job-1" -> "job-0"): it still parses;
  // the checksum tells.
  std::string altered = bytes;
  size_t name = altered.find("job-1");
  ASSERT_NE(name, std::string::npos);
  altered[name + 4] = '0';
  for (const std::string& broken : {bytes.substr(0, bytes.size() - 3), bytes.substr(0, bytes.size() / 2),
                                    std::string("not a backup\n"), bytes + "x", altered}) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << broken;
    absl::StatusOr<BackupCounts> r = RestoreBackup(path_, *fresh);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_TRUE(fresh->ListJobs({})->empty());
  }
  EXPECT_EQ(RestoreBackup(dir_.path() + "/missing", *fresh).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace trainyard
