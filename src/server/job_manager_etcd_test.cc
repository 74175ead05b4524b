// The job manager on a real etcd store whose transactions hold few keys: a
// write of everything that changed since the last one (under load, far more
// than one transaction holds) still lands, and the launches that wait for it
// go out.
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "api/job_spec.h"
#include "common/clock.h"
#include "common/wait_until.h"
#include "server/agent_streams.h"
#include "server/job_manager.h"
#include "server/control/test_node.h"
#include "store/etcd_state_store.h"
#include "tests/etcd/etcd_test_cluster.h"

namespace trainyard::server {
namespace {

// An agent link whose launches the test reads while the store's thread
// sends them.
class LockedLink : public AgentLink {
 public:
  void Send(v1::ServerMessage msg) override {
    absl::MutexLock lock(&mu_);
    if (msg.has_launch()) ++launches_;
  }
  int launches() {
    absl::MutexLock lock(&mu_);
    return launches_;
  }

 private:
  absl::Mutex mu_;
  int launches_ = 0;
};

TEST(JobManagerEtcdTest, AWriteOfMoreThanOneTransactionHoldsLandsAndItsLaunchesGoOut) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  constexpr int kMaxTxnOps = 16;
  EtcdStoreOptions options;
  options.connect = etcd.connect_options();
  options.max_txn_ops = kMaxTxnOps;
  absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();

  ServerConfig config;
  config.jobmaster_enabled = false;
  config.store = etcd.address();
  config.etcd_max_txn_ops = kMaxTxnOps;
  config.launch_after_durable = true;  // as a server on etcd runs
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  auto sched = core::Scheduler::Create(core::SchedulerOptions{});
  ASSERT_TRUE(sched.ok()) << sched.status();
  AgentStreams streams;
  auto manager = std::make_unique<JobManager>(config, store->get(), std::move(*sched), &streams, &clock);
  ASSERT_TRUE(manager->Recover().ok());
  LockedLink link;
  ASSERT_TRUE(manager->RegisterAgent(testing::TestNode("n1", 8), streams.Open(&link)).ok());

  // 40 jobs placed in one round: their records and events are one write of
  // more than 100 keys.
  constexpr int kJobs = 40;
  for (int i = 0; i < kJobs; ++i) {
    auto spec = api::LoadJobSpec(absl::StrCat("name: j", i,
                                              "\nreplicas:\n  worker:\n    resources: {cpu: 10m, memory: 64Mi}\n"
                                              "    command: [x]\n"),
                                 config.limits);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto submitted = manager->Submit(*spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
  }
  manager->ScheduleNowForTest();
  EXPECT_TRUE(WaitUntil([&] { return link.launches() == kJobs; }, absl::Seconds(30)))
      << link.launches() << " of " << kJobs << " launched";

  // etcd holds every placement: a second store reads each task on n1.
  manager.reset();
  absl::StatusOr<std::unique_ptr<EtcdStateStore>> reread = EtcdStateStore::Open(options);
  ASSERT_TRUE(reread.ok()) << reread.status();
  absl::StatusOr<std::vector<v1::JobRecord>> jobs = (*reread)->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), static_cast<size_t>(kJobs));
  for (const v1::JobRecord& job : *jobs) {
    ASSERT_EQ(job.tasks_size(), 1) << job.name();
    EXPECT_EQ(job.tasks(0).node(), "n1") << job.DebugString();
  }
}

}  // namespace
}  // namespace trainyard::server
