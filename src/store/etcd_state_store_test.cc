// The etcd store within etcd's limits on one transaction (--max-txn-ops,
// --max-request-bytes): batches queued together are packed into as few
// transactions as fit, every one of them lands, and a batch that alone passes
// a limit fails by itself. Real etcd; each test reopens a second store on
// what etcd holds.
#include <gtest/gtest.h>

#include <memory>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "store/etcd_state_store.h"
#include "store/store_test_util.h"
#include "tests/etcd/etcd_test_cluster.h"

namespace trainyard {
namespace {

using store_test::MakeEvent;
using store_test::MakeJob;

class EtcdStateStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = new store_test::EtcdTestCluster(1); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(etcd_->status().ok()) << etcd_->status();
    options_.connect.endpoints = etcd_->endpoints();
    options_.prefix = absl::StrCat("/limits-", ++tests_, "/");
  }

  std::unique_ptr<EtcdStateStore> Open() {
    absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(options_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Creates jobs[i] in batch i, every batch queued while the committer is
  // held inside the callback of an earlier write, so that they are taken
  // together; returns each batch's outcome.
  static std::vector<absl::Status> CommitQueuedTogether(EtcdStateStore& store, const std::vector<v1::JobRecord>& jobs) {
    absl::Notification held, release;
    WriteBatch first;
    first.PutMeta("first", "1");
    store.CommitAsync(std::move(first), [&](absl::Status) {
      held.Notify();
      release.WaitForNotification();
    });
    held.WaitForNotification();
    // Shared with the callbacks: a test that gives up waiting leaves them
    // something to write to.
    struct Outcomes {
      absl::Mutex mu;
      std::vector<absl::Status> of;
      size_t called = 0;
      bool All() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return called == of.size(); }
    };
    auto outcomes = std::make_shared<Outcomes>();
    outcomes->of.assign(jobs.size(), absl::UnknownError("not called"));
    for (size_t i = 0; i < jobs.size(); ++i) {
      WriteBatch batch;
      batch.CreateJob(jobs[i], MakeEvent(jobs[i].id(), "submitted"));
      store.CommitAsync(std::move(batch), [outcomes, i](absl::Status s) {
        absl::MutexLock lock(&outcomes->mu);
        outcomes->of[i] = s;
        ++outcomes->called;
      });
    }
    release.Notify();
    absl::MutexLock lock(&outcomes->mu);
    EXPECT_TRUE(outcomes->mu.AwaitWithTimeout(absl::Condition(outcomes.get(), &Outcomes::All), absl::Seconds(60)));
    return outcomes->of;
  }

  // Every batch but the one creating job `refused` succeeded; that one
  // failed as too large, its message naming `why`.
  static void ExpectAllLandedBut(const std::vector<v1::JobRecord>& jobs, const std::vector<absl::Status>& outcomes,
                                 uint64_t refused, const std::string& why) {
    ASSERT_EQ(outcomes.size(), jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].id() == refused) {
        EXPECT_TRUE(absl::IsResourceExhausted(outcomes[i])) << outcomes[i];
        EXPECT_NE(outcomes[i].message().find(why), std::string::npos) << outcomes[i];
      } else {
        EXPECT_TRUE(outcomes[i].ok()) << jobs[i].id() << ": " << outcomes[i];
      }
    }
  }

  static store_test::EtcdTestCluster* etcd_;
  static int tests_;
  EtcdStoreOptions options_;
};

store_test::EtcdTestCluster* EtcdStateStoreTest::etcd_ = nullptr;
int EtcdStateStoreTest::tests_ = 0;

TEST_F(EtcdStateStoreTest, QueuedBatchesPastOneTransactionsKeysArePackedIntoFewTransactionsAndAllLand) {
  // A one-task job takes 3 keys (row, task chunk, event): 3 jobs to a
  // transaction of at most 9.
  options_.max_txn_ops = 9;
  options_.max_group_batches = 64;
  std::unique_ptr<EtcdStateStore> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<v1::JobRecord> jobs;
  for (uint64_t id = 1; id <= 150; ++id) jobs.push_back(MakeJob(id));
  // Job 70 has 9 chunks of tasks: 11 keys, past the limit by itself.
  jobs[69] = MakeJob(70, 9 * 64);
  int64_t transactions_before = store->Stats().transactions;

  ExpectAllLandedBut(jobs, CommitQueuedTogether(*store, jobs), 70, "11 keys");
  // The first write, then groups of 64, 64 and 22 batches, three to a
  // transaction: jobs 1-64 in 22; 65-69 in 2 and 71-128 in 20 (job 70 is
  // refused before it is sent); 129-150 in 8.
  StoreStats stats = store->Stats();
  EXPECT_EQ(stats.transactions - transactions_before, 1 + 22 + 22 + 8);
  EXPECT_EQ(stats.batches_failed, 1);

  // etcd holds every job but the refused one, with its task and event.
  std::unique_ptr<EtcdStateStore> reread = Open();
  ASSERT_NE(reread, nullptr);
  absl::StatusOr<std::vector<v1::JobRecord>> listed = reread->ListJobs({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), jobs.size() - 1);
  for (const v1::JobRecord& job : *listed) {
    EXPECT_NE(job.id(), 70u);
    EXPECT_EQ(job.tasks_size(), 1) << job.id();
    absl::StatusOr<std::vector<v1::JobEventRecord>> events = reread->ListEvents(job.id());
    ASSERT_TRUE(events.ok()) << events.status();
    EXPECT_EQ(events->size(), 1u) << job.id();
  }
}

TEST_F(EtcdStateStoreTest, QueuedBatchesPastOneTransactionsBytesAreSplitAndAllLand) {
  // Each job's row carries a 1,500-byte command: one fits in 3,000 bytes,
  // two do not.
  options_.max_request_bytes = 3000;
  std::unique_ptr<EtcdStateStore> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<v1::JobRecord> jobs;
  for (uint64_t id = 1; id <= 20; ++id) {
    v1::JobRecord job = MakeJob(id);
    job.mutable_spec()->add_replicas()->add_command(std::string(1500, 'x'));
    jobs.push_back(job);
  }
  v1::JobRecord huge = MakeJob(21);
  huge.mutable_spec()->add_replicas()->add_command(std::string(4000, 'x'));
  jobs.push_back(huge);

  ExpectAllLandedBut(jobs, CommitQueuedTogether(*store, jobs), 21, "--etcd-max-request-bytes");
  std::unique_ptr<EtcdStateStore> reread = Open();
  ASSERT_NE(reread, nullptr);
  absl::StatusOr<std::vector<v1::JobRecord>> listed = reread->ListJobs({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), jobs.size() - 1);
  EXPECT_TRUE(absl::IsNotFound(reread->GetJob(21).status()));
}

TEST(SplitForEtcdTest, CutsABatchInOrderIntoBatchesWithinTheLimitsEachWriteWhole) {
  WriteBatch batch;
  for (uint64_t id = 1; id <= 7; ++id) batch.CreateJob(MakeJob(id), MakeEvent(id, "submitted"));  // 3 keys each
  batch.CreateJob(MakeJob(8, 9 * 64), MakeEvent(8, "submitted"));                                  // 11 keys
  batch.PutMeta("after", "1");
  std::vector<WriteBatch> parts = SplitForEtcd(std::move(batch), 9, 1536 * 1024, 12);
  std::vector<std::vector<uint64_t>> ids;  // the jobs of each part; 0 for the metadata
  for (const WriteBatch& part : parts) {
    ids.emplace_back();
    for (const WriteBatch::Op& op : part.ops()) {
      const auto* create = std::get_if<WriteBatch::CreateJobOp>(&op);
      ids.back().push_back(create != nullptr ? create->job.id() : 0);
    }
  }
  EXPECT_EQ(ids, (std::vector<std::vector<uint64_t>>{{1, 2, 3}, {4, 5, 6}, {7}, {8}, {0}}));

  // Bytes: rows of 1,500 bytes and more, two to a 5,000-byte request.
  WriteBatch heavy;
  for (uint64_t id = 1; id <= 4; ++id) {
    v1::JobRecord job = MakeJob(id);
    job.mutable_spec()->add_replicas()->add_command(std::string(1500, 'x'));
    heavy.UpdateJob(job);
  }
  parts = SplitForEtcd(std::move(heavy), 128, 5000, 12);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].size(), 2u);
  EXPECT_EQ(parts[1].size(), 2u);
}

}  // namespace
}  // namespace trainyard
