// The StateStore contract, run over every store: SQLite, etcd (a real etcd
// member) and the in-memory fake must agree on every outcome a server relies
// on. The etcd store serves reads from memory, so each of its tests ends by
// opening a second store on what etcd holds and comparing every record.
#include "store/state_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "store/etcd_state_store.h"
#include "tests/etcd/etcd_test_cluster.h"
#include "store/memory_state_store.h"
#include "store/sqlite_state_store.h"
#include "store/store_test_util.h"

namespace trainyard {
namespace {

using store_test::MakeEvent;
using store_test::MakeJob;
using store_test::MakeNode;
using store_test::SameMessage;
using ::testing::HasSubstr;

enum class Kind { kSqlite, kMemory, kEtcd };

class StateStoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  void SetUp() override {
    if (GetParam() == Kind::kMemory) {
      store_ = std::make_unique<MemoryStateStore>();
      return;
    }
    if (GetParam() == Kind::kEtcd) {
      if (etcd_ == nullptr) etcd_ = new store_test::EtcdTestCluster(1);
      ASSERT_TRUE(etcd_->status().ok()) << etcd_->status();
      // Each test its own prefix in the suite's one etcd.
      etcd_options_.connect.endpoints = etcd_->endpoints();
      etcd_options_.prefix = absl::StrCat("/test-", ++etcd_tests_, "/");
      absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(etcd_options_);
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
      return;
    }
    SqliteStoreOptions options;
    options.sync = StoreSync::kOff;  // durability has its own tests
    absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir_.path(), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  absl::Status Create(const v1::JobRecord& job) {
    WriteBatch batch;
    batch.CreateJob(job, MakeEvent(job.id(), "submitted"));
    return store_->Commit(std::move(batch));
  }

  void TearDown() override {
    if (GetParam() != Kind::kEtcd || store_ == nullptr) return;
    absl::StatusOr<std::unique_ptr<EtcdStateStore>> reread = EtcdStateStore::Open(etcd_options_);
    ASSERT_TRUE(reread.ok()) << reread.status();
    ExpectSameRecords(*store_, **reread);
  }

  // Every record of `a` is in `b`, equal, and nothing more.
  static void ExpectSameRecords(StateStore& a, StateStore& b) {
    absl::StatusOr<std::vector<v1::JobRecord>> jobs_a = a.ListJobs({});
    absl::StatusOr<std::vector<v1::JobRecord>> jobs_b = b.ListJobs({});
    ASSERT_TRUE(jobs_a.ok() && jobs_b.ok());
    ASSERT_EQ(jobs_a->size(), jobs_b->size());
    for (size_t i = 0; i < jobs_a->size(); ++i) {
      EXPECT_TRUE(SameMessage((*jobs_a)[i], (*jobs_b)[i])) << (*jobs_b)[i].DebugString();
      absl::StatusOr<std::vector<v1::JobEventRecord>> events_a = a.ListEvents((*jobs_a)[i].id());
      absl::StatusOr<std::vector<v1::JobEventRecord>> events_b = b.ListEvents((*jobs_a)[i].id());
      ASSERT_TRUE(events_a.ok() && events_b.ok());
      ASSERT_EQ(events_a->size(), events_b->size());
      for (size_t e = 0; e < events_a->size(); ++e) {
        EXPECT_TRUE(SameMessage((*events_a)[e], (*events_b)[e]));
      }
    }
    absl::StatusOr<StoreSnapshot> snap_a = a.LoadAll();
    absl::StatusOr<StoreSnapshot> snap_b = b.LoadAll();
    ASSERT_TRUE(snap_a.ok() && snap_b.ok());
    EXPECT_EQ(snap_a->meta, snap_b->meta);
    EXPECT_EQ(snap_a->max_job_id, snap_b->max_job_id);
    ASSERT_EQ(snap_a->nodes.size(), snap_b->nodes.size());
    for (size_t i = 0; i < snap_a->nodes.size(); ++i) {
      EXPECT_TRUE(SameMessage(snap_a->nodes[i], snap_b->nodes[i]));
    }
  }

  static store_test::EtcdTestCluster* etcd_;
  static int etcd_tests_;
  EtcdStoreOptions etcd_options_;
  store_test::TempDir dir_;
  StateStorePtr store_;
};

store_test::EtcdTestCluster* StateStoreTest::etcd_ = nullptr;
int StateStoreTest::etcd_tests_ = 0;

TEST_P(StateStoreTest, CreatedJobReadsBackWithTasksAndFirstEvent) {
  v1::JobRecord job = MakeJob(7, 3);
  ASSERT_TRUE(Create(job).ok());
  absl::StatusOr<v1::JobRecord> got = store_->GetJob(7);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameMessage(*got, job)) << got->DebugString();
  absl::StatusOr<v1::JobRecord> by_name = store_->GetJobByName("job-7");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_TRUE(SameMessage(*by_name, job));
  absl::StatusOr<std::vector<v1::JobEventRecord>> events = store_->ListEvents(7);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind(), "submitted");
  EXPECT_EQ((*events)[0].job_id(), 7u);
}

TEST_P(StateStoreTest, MissingRecordsAreNotFound) {
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(1).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetJobByName("nope").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->ListEvents(1).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetNode("n1").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetMeta("next_job_id").status()));
}

TEST_P(StateStoreTest, UpdateReplacesJobFieldsAndUpsertsListedTasksOnly) {
  ASSERT_TRUE(Create(MakeJob(1, 3)).ok());
  v1::JobRecord update = MakeJob(1, 0);
  update.set_state(v1::JOB_RUNNING);
  update.set_pending_reason("");
  v1::TaskRecord& task = *update.add_tasks();
  task.set_role("worker");
  task.set_index(1);
  task.set_node("n1");
  task.set_state(v1::TASK_RUNNING);
  task.mutable_allocation()->set_gpu_mask(0b11);
  WriteBatch batch;
  batch.UpdateJob(update);
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());

  absl::StatusOr<v1::JobRecord> got = store_->GetJob(1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state(), v1::JOB_RUNNING);
  EXPECT_EQ(got->pending_reason(), "");
  ASSERT_EQ(got->tasks_size(), 3);
  EXPECT_EQ(got->tasks(0).state(), v1::TASK_PENDING);
  EXPECT_TRUE(SameMessage(got->tasks(1), task));
  EXPECT_EQ(got->tasks(2).index(), 2);
}

TEST_P(StateStoreTest, AnUpdatedJobReadsBackWholeFieldsBeforeAndAfterItsTasksIncluded) {
  // The SQLite store keeps a job's tasks in their own rows and the rest of
  // its record in one blob: every field on either side of the tasks, the
  // spec's environment map and repeated fields, must come back as written.
  ASSERT_TRUE(Create(MakeJob(5, 2)).ok());
  v1::JobRecord job = MakeJob(5, 2);
  job.set_state(v1::JOB_FAILED);
  job.set_start_time_ms(1700000001000);
  job.set_end_time_ms(1700000002000);
  job.set_message(std::string(300, 'm'));  // a length that takes two bytes to encode
  v1::ReplicaSpec& replica = *job.mutable_spec()->mutable_replicas(0);
  (*replica.mutable_env())["LR"] = "0.1";
  (*replica.mutable_env())["BATCH"] = "64";
  replica.add_command("--epochs=3");
  for (v1::TaskRecord& task : *job.mutable_tasks()) {
    task.set_node("n1");
    task.set_state(v1::TASK_FAILED);
    task.mutable_allocation()->set_gpu_mask(1ull << task.index());
  }
  WriteBatch batch;
  batch.UpdateJob(job);
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  absl::StatusOr<v1::JobRecord> got = store_->GetJob(5);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameMessage(*got, job)) << got->DebugString();
}

TEST_P(StateStoreTest, PutTaskAddsAndReplacesTasksKeepingFirstWriteOrder) {
  ASSERT_TRUE(Create(MakeJob(1, 1)).ok());
  WriteBatch batch;
  v1::TaskRecord ps;
  ps.set_role("ps");
  ps.set_index(0);
  batch.PutTask(1, ps);
  v1::TaskRecord worker = MakeJob(1, 1).tasks(0);
  worker.set_restart_count(2);
  worker.set_attempt(3);
  worker.mutable_exit()->set_exit_code(137);
  batch.PutTask(1, worker);
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  absl::StatusOr<v1::JobRecord> got = store_->GetJob(1);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->tasks_size(), 2);
  EXPECT_TRUE(SameMessage(got->tasks(0), worker));
  EXPECT_EQ(got->tasks(1).role(), "ps");
}

TEST_P(StateStoreTest, FailedBatchLeavesNothingBehind) {
  ASSERT_TRUE(Create(MakeJob(1)).ok());
  WriteBatch batch;
  batch.CreateJob(MakeJob(2), MakeEvent(2, "submitted"));
  batch.PutMeta("next_job_id", "3");
  batch.PutNode(MakeNode("n1"));
  batch.AppendEvent(MakeEvent(1, "preempted"));
  batch.PutTask(99, MakeJob(99).tasks(0));  // no job 99: the whole batch fails
  absl::Status status = store_->Commit(std::move(batch));
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("job 99 does not exist"));
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(2).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetMeta("next_job_id").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetNode("n1").status()));
  absl::StatusOr<std::vector<v1::JobEventRecord>> events = store_->ListEvents(1);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);
  // The store still takes writes after a failed batch.
  EXPECT_TRUE(Create(MakeJob(2)).ok());
}

TEST_P(StateStoreTest, DuplicateIdOrNameIsRejectedWithoutEffect) {
  ASSERT_TRUE(Create(MakeJob(1)).ok());
  absl::Status same_id = Create(MakeJob(1, 5));
  EXPECT_TRUE(absl::IsAlreadyExists(same_id)) << same_id;
  EXPECT_THAT(same_id.message(), HasSubstr("job id 1 already exists"));
  v1::JobRecord same_name = MakeJob(2);
  same_name.set_name("job-1");
  absl::Status name_taken = Create(same_name);
  EXPECT_TRUE(absl::IsAlreadyExists(name_taken)) << name_taken;
  EXPECT_THAT(name_taken.message(), HasSubstr("job name 'job-1' already exists"));
  absl::StatusOr<v1::JobRecord> got = store_->GetJob(1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tasks_size(), 1);
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(2).status()));
}

TEST_P(StateStoreTest, InvalidRecordsAreRejectedNamingTheField) {
  v1::JobRecord no_id = MakeJob(0);
  EXPECT_THAT(Create(no_id).message(), HasSubstr("job.id is 0"));
  v1::JobRecord no_name = MakeJob(3);
  no_name.clear_name();
  EXPECT_THAT(Create(no_name).message(), HasSubstr("empty name"));
  v1::JobRecord twice = MakeJob(4, 2);
  twice.mutable_tasks(1)->set_index(0);
  absl::Status dup = Create(twice);
  EXPECT_TRUE(absl::IsInvalidArgument(dup));
  EXPECT_THAT(dup.message(), HasSubstr("task worker/0 twice"));
  WriteBatch nameless_node;
  nameless_node.PutNode(v1::NodeRecord());
  EXPECT_THAT(store_->Commit(std::move(nameless_node)).message(),
              HasSubstr("node.info.name is empty"));
  WriteBatch update_missing;
  update_missing.UpdateJob(MakeJob(42));
  EXPECT_TRUE(absl::IsNotFound(store_->Commit(std::move(update_missing))));
}

TEST_P(StateStoreTest, ListJobsFiltersByStateQueueAndUser) {
  ASSERT_TRUE(Create(MakeJob(1, 1, "prod", "alice")).ok());
  ASSERT_TRUE(Create(MakeJob(2, 2, "prod", "bob")).ok());
  v1::JobRecord done = MakeJob(3, 1, "dev", "alice");
  done.set_state(v1::JOB_SUCCEEDED);
  ASSERT_TRUE(Create(done).ok());

  auto ids = [&](const JobFilter& filter) {
    std::vector<uint64_t> out;
    absl::StatusOr<std::vector<v1::JobRecord>> jobs = store_->ListJobs(filter);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    for (const v1::JobRecord& j : *jobs) out.push_back(j.id());
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(ids({.states = {v1::JOB_QUEUED}}), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(ids({.states = {v1::JOB_SUCCEEDED, v1::JOB_FAILED}}), (std::vector<uint64_t>{3}));
  EXPECT_EQ(ids({.queue = "prod"}), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(ids({.user = "alice"}), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(ids({.queue = "prod", .user = "bob"}), (std::vector<uint64_t>{2}));
  EXPECT_EQ(ids({.limit = 2}), (std::vector<uint64_t>{1, 2}));

  absl::StatusOr<std::vector<v1::JobRecord>> with_tasks = store_->ListJobs({.queue = "prod"});
  ASSERT_TRUE(with_tasks.ok());
  EXPECT_EQ((*with_tasks)[1].tasks_size(), 2);
  absl::StatusOr<std::vector<v1::JobRecord>> bare = store_->ListJobs({.include_tasks = false});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)[1].tasks_size(), 0);
}

TEST_P(StateStoreTest, EventsComeBackInAppendOrderPerJob) {
  ASSERT_TRUE(Create(MakeJob(1)).ok());
  ASSERT_TRUE(Create(MakeJob(2)).ok());
  const std::vector<std::string> kinds = {"scheduled", "started", "task_restarted", "preempted",
                                          "finished"};
  for (const std::string& kind : kinds) {
    WriteBatch batch;
    batch.AppendEvent(MakeEvent(1, kind));
    batch.AppendEvent(MakeEvent(2, kind + "-2"));
    ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  }
  absl::StatusOr<std::vector<v1::JobEventRecord>> events = store_->ListEvents(1);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), kinds.size() + 1);
  EXPECT_EQ((*events)[0].kind(), "submitted");
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ((*events)[i + 1].kind(), kinds[i]);
    EXPECT_GT((*events)[i + 1].seq(), (*events)[i].seq());
  }
  WriteBatch orphan;
  orphan.AppendEvent(MakeEvent(9, "started"));
  EXPECT_TRUE(absl::IsNotFound(store_->Commit(std::move(orphan))));
}

TEST_P(StateStoreTest, NodesAndMetadataRoundTrip) {
  WriteBatch batch;
  batch.PutNode(MakeNode("n2"));
  batch.PutNode(MakeNode("n1"));
  batch.PutMeta("next_job_id", "17");
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  WriteBatch later;
  later.PutNode(MakeNode("n1", v1::NODE_LOST));
  later.DeleteNode("n2");
  later.DeleteNode("never-registered");
  later.PutMeta("next_job_id", "18");
  ASSERT_TRUE(store_->Commit(std::move(later)).ok());

  absl::StatusOr<std::vector<v1::NodeRecord>> nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_TRUE(SameMessage((*nodes)[0], MakeNode("n1", v1::NODE_LOST)));
  absl::StatusOr<v1::NodeRecord> n1 = store_->GetNode("n1");
  ASSERT_TRUE(n1.ok());
  EXPECT_EQ(n1->info().state(), v1::NODE_LOST);
  EXPECT_EQ(*store_->GetMeta("next_job_id"), "18");
}

TEST_P(StateStoreTest, DeletedMetadataIsGoneAndABinaryValueRoundTrips) {
  const std::string binary("a\0b\xff", 4);  // a schedule's record is a serialized message
  WriteBatch batch;
  batch.PutMeta("schedule/nightly", binary);
  batch.PutMeta("schedule/hourly", "x");
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  EXPECT_EQ(*store_->GetMeta("schedule/nightly"), binary);
  WriteBatch del;
  del.DeleteMeta("schedule/hourly");
  del.DeleteMeta("schedule/never-made");
  // Put and delete in one write: the last one counts.
  del.PutMeta("schedule/again", "1");
  del.DeleteMeta("schedule/again");
  ASSERT_TRUE(store_->Commit(std::move(del)).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetMeta("schedule/hourly").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetMeta("schedule/again").status()));
  absl::StatusOr<StoreSnapshot> snap = store_->LoadAll();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->meta.count("schedule/hourly"), 0u);
  EXPECT_EQ(snap->meta.count("schedule/again"), 0u);
  EXPECT_EQ(snap->meta.at("schedule/nightly"), binary);
}

TEST_P(StateStoreTest, LoadAllReturnsLiveJobsEveryNodeAndMetadata) {
  ASSERT_TRUE(Create(MakeJob(1, 2)).ok());
  v1::JobRecord finished = MakeJob(5);
  finished.set_state(v1::JOB_KILLED);
  ASSERT_TRUE(Create(finished).ok());
  v1::JobRecord running = MakeJob(3, 3);
  running.set_state(v1::JOB_RUNNING);
  ASSERT_TRUE(Create(running).ok());
  WriteBatch batch;
  batch.PutNode(MakeNode("n1"));
  batch.PutMeta("next_job_id", "6");
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());

  absl::StatusOr<StoreSnapshot> snapshot = store_->LoadAll();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->jobs.size(), 2u);
  EXPECT_TRUE(SameMessage(snapshot->jobs[0], MakeJob(1, 2)));
  EXPECT_TRUE(SameMessage(snapshot->jobs[1], running));
  ASSERT_EQ(snapshot->nodes.size(), 1u);
  EXPECT_EQ(snapshot->meta.at("next_job_id"), "6");
  EXPECT_EQ(snapshot->max_job_id, 5u);
}

v1::TaskRecord PlacedTask(const std::string& role, int index, uint64_t gpus, uint32_t port) {
  v1::TaskRecord task;
  task.set_role(role);
  task.set_index(index);
  task.set_node("n1");
  task.set_state(v1::TASK_RUNNING);
  task.mutable_allocation()->set_gpu_mask(gpus);
  v1::PortRange& range = *task.mutable_allocation()->add_ports();
  range.set_begin(port);
  range.set_end(port + 1);
  return task;
}

TEST_P(StateStoreTest, CheckIntegrityReportsGpusAndPortsHeldTwice) {
  v1::JobRecord a = MakeJob(1, 0);
  *a.add_tasks() = PlacedTask("worker", 0, 0b0011, 30000);
  v1::JobRecord b = MakeJob(2, 0);
  *b.add_tasks() = PlacedTask("worker", 0, 0b1100, 30010);
  ASSERT_TRUE(Create(a).ok());
  ASSERT_TRUE(Create(b).ok());
  EXPECT_TRUE(store_->CheckIntegrity().ok()) << store_->CheckIntegrity();

  v1::JobRecord clash = MakeJob(3, 0);
  *clash.add_tasks() = PlacedTask("ps", 0, 0b0100, 30001);
  v1::TaskRecord ended = PlacedTask("worker", 1, 0b0001, 30000);
  ended.set_state(v1::TASK_FAILED);  // an ended task holds nothing
  *clash.add_tasks() = ended;
  ASSERT_TRUE(Create(clash).ok());
  absl::Status status = store_->CheckIntegrity();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("GPU 2 held by job 2 worker/0 and job 3 ps/0"));
  EXPECT_THAT(status.message(),
              HasSubstr("ports 30001-30001 held by job 1 worker/0 and job 3 ps/0"));
  EXPECT_THAT(status.message(), Not(HasSubstr("worker/1")));
}

TEST_P(StateStoreTest, ANameGivenUpAndTakenInOneBatchBelongsToItsNewJob) {
  v1::JobRecord six = MakeJob(6);
  six.set_name("a");
  ASSERT_TRUE(Create(six).ok());
  // Job 6 becomes "b" and a new job 5 takes "a", in one batch.
  WriteBatch batch;
  v1::JobRecord renamed = six;
  renamed.clear_tasks();
  renamed.set_name("b");
  batch.UpdateJob(renamed);
  v1::JobRecord five = MakeJob(5);
  five.set_name("a");
  batch.CreateJob(five, MakeEvent(5, "submitted"));
  ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  absl::StatusOr<v1::JobRecord> a = store_->GetJobByName("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->id(), 5u);
  absl::StatusOr<v1::JobRecord> b = store_->GetJobByName("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->id(), 6u);
}

TEST_P(StateStoreTest, APurgedJobIsGoneWithItsTasksAndEventsAndItsNameIsFree) {
  ASSERT_TRUE(Create(MakeJob(1, 3)).ok());
  ASSERT_TRUE(Create(MakeJob(2, 2)).ok());
  WriteBatch events;
  events.AppendEvent(MakeEvent(1, "started"));
  ASSERT_TRUE(store_->Commit(std::move(events)).ok());
  WriteBatch purge;
  purge.PurgeJob(1);
  purge.PurgeJob(99);  // absent: nothing to do
  ASSERT_TRUE(store_->Commit(std::move(purge)).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(1).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetJobByName("job-1").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->ListEvents(1).status()));
  absl::StatusOr<std::vector<v1::JobRecord>> all = store_->ListJobs({});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].id(), 2u);
  EXPECT_EQ((*all)[0].tasks_size(), 2) << "the other job keeps its tasks";
  EXPECT_TRUE(store_->CheckIntegrity().ok()) << "no task or event left without its job";
  // Its name may be taken by a new job, in the batch that purges it too.
  v1::JobRecord again = MakeJob(3);
  again.set_name("job-2");
  WriteBatch reuse;
  reuse.PurgeJob(2);
  reuse.CreateJob(again, MakeEvent(3, "submitted"));
  ASSERT_TRUE(store_->Commit(std::move(reuse)).ok());
  EXPECT_EQ(store_->GetJobByName("job-2")->id(), 3u);
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(2).status()));
}

TEST_P(StateStoreTest, ConcurrentWritersAllLandAndCallbacksRun) {
  constexpr int kThreads = 8;
  constexpr int kJobsPerThread = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kJobsPerThread; ++i) {
        if (!Create(MakeJob(1 + t * kJobsPerThread + i)).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  absl::Notification done;
  absl::Status async_status = absl::UnknownError("not called");
  WriteBatch batch;
  batch.CreateJob(MakeJob(1000), MakeEvent(1000, "submitted"));
  store_->CommitAsync(std::move(batch), [&](absl::Status s) {
    async_status = s;
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(async_status.ok()) << async_status;

  absl::StatusOr<std::vector<v1::JobRecord>> jobs = store_->ListJobs({.include_tasks = false});
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), static_cast<size_t>(kThreads * kJobsPerThread + 1));
  StoreStats stats = store_->Stats();
  EXPECT_EQ(stats.batches_committed, kThreads * kJobsPerThread + 1);
}

TEST_P(StateStoreTest, QueuedBatchesSucceedOrFailEachOnItsOwn) {
  // Queued back to back, these usually share one group transaction; each
  // must still get its own outcome.
  constexpr int kBatches = 50;
  absl::Mutex mu;
  std::vector<absl::Status> outcomes(kBatches, absl::UnknownError("not called"));
  int called = 0;
  for (int i = 0; i < kBatches; ++i) {
    WriteBatch batch;
    batch.CreateJob(MakeJob(i % 10 == 9 ? 1 : i + 1), MakeEvent(i + 1, "submitted"));
    store_->CommitAsync(std::move(batch), [&, i](absl::Status s) {
      absl::MutexLock lock(&mu);
      outcomes[i] = s;
      ++called;
    });
  }
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](int* n) { return *n == kBatches; }, &called),
                                  absl::Seconds(30)));
  for (int i = 0; i < kBatches; ++i) {
    if (i % 10 == 9) {
      EXPECT_TRUE(absl::IsAlreadyExists(outcomes[i])) << i << ": " << outcomes[i];
      EXPECT_TRUE(absl::IsNotFound(store_->GetJob(i + 1).status()));
    } else {
      EXPECT_TRUE(outcomes[i].ok()) << i << ": " << outcomes[i];
      EXPECT_TRUE(store_->GetJob(i + 1).ok());
    }
  }
}

TEST_P(StateStoreTest, CommitInsideACallbackIsRefusedNotDeadlocked) {
  absl::Notification done;
  absl::Status inner;
  WriteBatch batch;
  batch.PutMeta("a", "1");
  store_->CommitAsync(std::move(batch), [&](absl::Status) {
    WriteBatch nested;
    nested.PutMeta("b", "2");
    inner = store_->Commit(std::move(nested));
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(absl::IsFailedPrecondition(inner)) << inner;
  EXPECT_THAT(inner.message(), HasSubstr("use CommitAsync there"));
}

INSTANTIATE_TEST_SUITE_P(EveryStore, StateStoreTest,
                         ::testing::Values(Kind::kSqlite, Kind::kMemory, Kind::kEtcd),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           switch (info.param) {
                             case Kind::kSqlite: return "Sqlite";
                             case Kind::kMemory: return "Memory";
                             case Kind::kEtcd: return "Etcd";
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace trainyard
