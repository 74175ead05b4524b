// The worker library against a real master over loopback: registration,
// discovery, barriers from several threads, pings, and surviving a master
// restart.
#include "jobmaster/client/job_master_client.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/wait_until.h"
#include "jobmaster/client/worker_controller.h"
#include "jobmaster/sim_fleet.h"
#include "jobmaster/test_master.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

JobMasterConfig Config(int workers) {
  JobMasterConfig c;
  c.job_name = "gpt";
  c.num_workers = workers;
  return c;
}

JobMasterClientOptions Options(int port, int id) {
  JobMasterClientOptions o;
  o.master_address = "127.0.0.1:" + std::to_string(port);
  o.info.set_worker_id(id);
  o.info.set_ip("127.0.0.1");
  o.ping_interval = absl::Milliseconds(5);
  o.connect_timeout = absl::Seconds(10);
  o.max_backoff = absl::Milliseconds(50);
  return o;
}

TEST(JobMasterClient, WorkersRegisterDiscoverEachOtherPassBarriersAndComplete) {
  TestMaster master(Config(3));
  std::vector<std::unique_ptr<JobMasterClient>> clients;
  for (int i = 0; i < 3; ++i) {
    auto c = JobMasterClient::Start(Options(master.port(), -1));
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  std::set<int> ids;
  for (auto& c : clients) ids.insert(c->worker_id());
  EXPECT_EQ(ids, (std::set<int>{0, 1, 2}));
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(6);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      JobMasterWorkerController controller(clients[i].get());
      auto all = controller.GetAllWorkers(absl::Seconds(10));
      EXPECT_TRUE(all.ok()) << all.status();
      if (all.ok()) {
        EXPECT_EQ(all->size(), 3u);
      }
      clients[i]->SendState(pb::RUNNING);
      results[2 * i] = controller.WaitOnBarrier(absl::Seconds(10));
      results[2 * i + 1] = controller.WaitOnBarrier(absl::Seconds(10));
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(master.Read<int64_t>([](const MasterState& s) { return s.barrier_generation(); }), 2);
  for (auto& c : clients) {
    EXPECT_TRUE(c->SetState(pb::COMPLETED, "", absl::Seconds(10)).ok());
  }
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, JobOutcome::kSucceeded);
}

// Worker 1 waits on barrier 1 when the master dies; a new master comes up on
// the same port (as the agent restarts the master task). The worker
// re-registers with its id and state, enters barrier 1 again, and passes it
// with worker 0; the new master's count follows the workers' generations.
TEST(JobMasterClient, BarrierInFlightWhenTheMasterRestartsPassesOnTheNewMaster) {
  auto first = std::make_unique<TestMaster>(Config(2));
  int port = first->port();
  std::vector<std::unique_ptr<JobMasterClient>> clients;
  for (int id = 0; id < 2; ++id) {
    auto c = JobMasterClient::Start(Options(port, id));
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->SetState(pb::RUNNING, "", absl::Seconds(10)).ok());
    clients.push_back(*std::move(c));
  }
  std::thread zero([&] { EXPECT_TRUE(clients[0]->WaitOnBarrier(absl::Seconds(10)).ok()); });
  ASSERT_TRUE(clients[1]->WaitOnBarrier(absl::Seconds(10)).ok());
  zero.join();
  absl::Status barrier = absl::UnknownError("not done");
  std::thread waiter([&] { barrier = clients[1]->WaitOnBarrier(absl::Seconds(30)); });
  ASSERT_TRUE(first->WaitUntil([](const MasterState& s) { return s.barrier_waiting() == 1; }));
  first->Shutdown();
  ASSERT_TRUE(WaitUntil([&] { return !clients[1]->connected(); }));
  JobMasterConfig config = Config(2);
  config.port = port;
  config.learn_barriers = true;  // restarted without its count
  TestMaster second(config);
  ASSERT_TRUE(second.status().ok()) << second.status();
  ASSERT_TRUE(second.WaitUntil([](const MasterState& s) {
    return s.joined_count() == 2 && s.StateOf(1) == pb::RUNNING && s.barrier_waiting() == 1;
  })) << "worker 1 re-registers and enters the barrier again";
  EXPECT_EQ(second.Read<int64_t>([](const MasterState& s) { return s.barrier_generation(); }), 1);
  EXPECT_TRUE(clients[0]->WaitOnBarrier(absl::Seconds(10)).ok());
  waiter.join();
  EXPECT_TRUE(barrier.ok()) << barrier;
  EXPECT_EQ(second.Read<int64_t>([](const MasterState& s) { return s.barrier_generation(); }), 2);
  EXPECT_EQ(second.Read<int>([](const MasterState& s) { return s.RestartsOf(1); }), 0);
  for (auto& c : clients) EXPECT_TRUE(c->SetState(pb::COMPLETED, "", absl::Seconds(10)).ok());
  auto end = second.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, JobOutcome::kSucceeded);
}

TEST(JobMasterClient, AMasterThatMovedIsFoundThroughTheAddressFile) {
  // The server rewrites the tasks' "jobmaster" file when it starts the
  // master on another node (another host:port).
  std::string file = ::testing::TempDir() + "/jobmaster-address-" + std::to_string(getpid());
  auto write = [&](int port) {
    std::ofstream(file, std::ios::trunc) << "127.0.0.1:" << port << "\n";
  };
  auto first = std::make_unique<TestMaster>(Config(2));
  write(first->port());
  std::vector<std::unique_ptr<JobMasterClient>> clients;
  for (int id = 0; id < 2; ++id) {
    JobMasterClientOptions o = Options(first->port(), id);
    o.master_address_file = file;
    auto c = JobMasterClient::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->SetState(pb::RUNNING, "", absl::Seconds(10)).ok());
    clients.push_back(*std::move(c));
  }
  first->Shutdown();
  ASSERT_TRUE(WaitUntil([&] { return !clients[0]->connected() && !clients[1]->connected(); }));
  TestMaster second(Config(2));  // a new port, as on another node
  ASSERT_TRUE(second.status().ok()) << second.status();
  write(second.port());
  ASSERT_TRUE(second.WaitUntil([](const MasterState& s) { return s.joined_count() == 2; }))
      << "both workers find the master at its new address";
  std::thread zero([&] { EXPECT_TRUE(clients[0]->WaitOnBarrier(absl::Seconds(10)).ok()); });
  EXPECT_TRUE(clients[1]->WaitOnBarrier(absl::Seconds(10)).ok());
  zero.join();
  std::remove(file.c_str());
}

TEST(JobMasterClient, BarrierFailsWithUnavailableWhenTheMasterDoesNotComeBackInTime) {
  auto master = std::make_unique<TestMaster>(Config(2));
  auto client = JobMasterClient::Start(Options(master->port(), 1));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::Status barrier;
  std::thread waiter([&] { barrier = (*client)->WaitOnBarrier(absl::Milliseconds(400)); });
  ASSERT_TRUE(master->WaitUntil([](const MasterState& s) { return s.barrier_waiting() == 1; }));
  master->Shutdown();
  waiter.join();
  EXPECT_EQ(barrier.code(), absl::StatusCode::kUnavailable) << barrier;
  EXPECT_THAT(barrier.message(), HasSubstr("barrier 0 not passed within 400ms: "));
  EXPECT_THAT(barrier.message(), HasSubstr("the job master at 127.0.0.1:"));
}

TEST(JobMasterClient, BarrierTimeoutIsNotRetried) {
  TestMaster master(Config(2));
  auto client = JobMasterClient::Start(Options(master.port(), 0));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::Status barrier = (*client)->WaitOnBarrier(absl::Milliseconds(50));
  EXPECT_EQ(barrier.code(), absl::StatusCode::kDeadlineExceeded) << barrier;
  EXPECT_EQ(barrier.message(), "barrier timed out with 1 of 2 workers arrived; missing: 1");
  EXPECT_EQ(master.Read<int>([](const MasterState& s) { return s.barrier_waiting(); }), 0);
}

TEST(JobMasterClient, PingsFromTheClientThreadKeepTheWorkerAlive) {
  JobMasterConfig config = Config(2);
  config.ping_interval = absl::Milliseconds(20);
  config.ping_misses = 3;
  config.max_restarts = 5;
  TestMaster master(config);
  auto client = JobMasterClient::Start(Options(master.port(), 0));
  ASSERT_TRUE(client.ok());
  // A silent worker registered after the client goes ERROR first.
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1, absl::Now() + absl::Seconds(10)).ok());
  pb::JobMasterRequest start;
  start.mutable_starting()->set_pings(true);
  start.mutable_starting()->mutable_info()->set_worker_id(1);
  fleet.Queue(0, start);
  ASSERT_TRUE(fleet.Exchange(1, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE(master.WaitUntil([](const MasterState& s) { return s.StateOf(1) == pb::ERROR; }));
  EXPECT_EQ(master.Read<int>([](const MasterState& s) { return s.StateOf(0); }), pb::STARTING);
}

TEST(JobMasterClient, UnreachableMasterIsAClearError) {
  JobMasterClientOptions options = Options(1, 0);
  options.connect_timeout = absl::Milliseconds(100);
  auto client = JobMasterClient::Start(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("cannot reach the job master at 127.0.0.1:1"));
}

TEST(JobMasterClient, RefusedRegistrationIsReturned) {
  TestMaster master(Config(2));
  auto client = JobMasterClient::Start(Options(master.port(), 5));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("worker_id 5 is outside 0..1"));
}

TEST(ClientOptionsFromEnvironment, NeedsTheMasterAddressAndIntegerIds) {
  unsetenv("TRAINYARD_JOB_MASTER");
  EXPECT_THAT(ClientOptionsFromEnvironment().status().message(),
              HasSubstr("TRAINYARD_JOB_MASTER is not set"));
  setenv("TRAINYARD_JOB_MASTER", "127.0.0.1:4000", 1);
  setenv("TRAINYARD_WORKER_ID", "two", 1);
  EXPECT_EQ(ClientOptionsFromEnvironment().status().message(),
            "TRAINYARD_WORKER_ID='two' is not an integer");
  setenv("TRAINYARD_WORKER_ID", "2", 1);
  setenv("TRAINYARD_PORTS", "31000,31001", 1);
  auto options = ClientOptionsFromEnvironment();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->info.worker_id(), 2);
  EXPECT_EQ(options->info.ports_size(), 2);
  unsetenv("TRAINYARD_WORKER_ID");
  unsetenv("TRAINYARD_PORTS");
  unsetenv("TRAINYARD_JOB_MASTER");
}

TEST(ParseHostPort, RejectsAddressesWithoutAPort) {
  EXPECT_EQ(ParseHostPort("10.0.0.5").status().message(),
            "job master address '10.0.0.5' is not host:port (e.g. 10.0.0.5:31000)");
  EXPECT_FALSE(ParseHostPort("host:70000").ok());
  EXPECT_EQ(ParseHostPort("node-3:31000")->port, 31000);
}

}  // namespace
}  // namespace trainyard::jobmaster

namespace trainyard::jobmaster {
namespace {

TEST(JobMasterClient, DirectoryAndRankZeroThroughARealMaster) {
  TestMaster master(Config(3));
  std::vector<std::unique_ptr<JobMasterClient>> clients;
  for (int i = 0; i < 3; ++i) {
    JobMasterClientOptions o = Options(master.port(), i);
    o.info.set_port(29500 + i);
    auto c = JobMasterClient::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  auto dir = clients[2]->Directory(pb::RESPONSE_AFTER_ALL_JOINED, absl::Seconds(10));
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_EQ((*dir)->workers.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*dir)->workers[i].info.worker_id(), i);
    EXPECT_EQ((*dir)->workers[i].info.ip(), "127.0.0.1");
    EXPECT_EQ((*dir)->workers[i].info.port(), 29500 + i);
  }
  // Asked again with nothing changed: the same table, from the client's cache.
  auto again = clients[2]->Directory(pb::IMMEDIATE, absl::Seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->get(), dir->get());
  auto zero = clients[1]->RankZero(absl::Seconds(10));
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->info().ip(), "127.0.0.1");
  EXPECT_EQ(zero->info().port(), 29500);
  EXPECT_EQ(zero->num_workers(), 3);
}

}  // namespace
}  // namespace trainyard::jobmaster
