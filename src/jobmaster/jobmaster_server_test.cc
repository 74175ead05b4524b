// The job master over loopback with many simulated workers (SimFleet):
// registration and ids, discovery, barriers, pings and the job's end.
#include <set>

#include "gmock/gmock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "jobmaster/sim_fleet.h"
#include "jobmaster/test_master.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

absl::Time JobmasterServerDeadline() { return absl::Now() + absl::Seconds(20); }

JobMasterConfig JobmasterServerConfig(int workers) {
  JobMasterConfig c;
  c.job_name = "mnist";
  c.num_workers = workers;
  return c;
}

std::vector<int> Ids(int n, int id) { return std::vector<int>(n, id); }

std::vector<int> JobmasterServerRange(int n) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

pb::JobMasterRequest StateRequest(pb::WorkerState state, std::string reason = "") {
  pb::JobMasterRequest r;
  r.set_request_id(77);
  r.mutable_state_change()->set_state(state);
  r.mutable_state_change()->set_reason(reason);
  return r;
}

pb::JobMasterRequest ListRequest(pb::ListWorkersMode mode, int64_t timeout_ms = 0) {
  pb::JobMasterRequest r;
  r.set_request_id(55);
  r.mutable_list_workers()->set_mode(mode);
  r.mutable_list_workers()->set_timeout_ms(timeout_ms);
  return r;
}

TEST(JobMasterServer, ThousandWorkersAskingForIdsGetEachOfZeroToNMinusOneOnce) {
  TestMaster master(JobmasterServerConfig(1000));
  ASSERT_TRUE(master.status().ok()) << master.status();
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1000, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(Ids(1000, -1), JobmasterServerDeadline()).ok());
  std::set<int> ids;
  for (int i = 0; i < 1000; ++i) {
    pb::JobMasterResponse r = fleet.Last(i);
    ASSERT_TRUE(r.has_registered()) << r.DebugString();
    EXPECT_EQ(r.registered().num_workers(), 1000);
    EXPECT_EQ(r.registered().state(), pb::STARTING);
    ids.insert(r.registered().worker_id());
  }
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 999);
}

TEST(JobMasterServer, PresentedIdsAreKeptWhateverTheArrivalOrder) {
  TestMaster master(JobmasterServerConfig(1000));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1000, JobmasterServerDeadline()).ok());
  std::vector<int> ids = JobmasterServerRange(1000);
  std::reverse(ids.begin(), ids.end());
  ASSERT_TRUE(fleet.RegisterAll(ids, JobmasterServerDeadline()).ok());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(fleet.Last(i).registered().worker_id(), 999 - i);
  fleet.ClearResponses();
  fleet.Queue(0, ListRequest(pb::IMMEDIATE));
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  pb::JobMasterResponse list = fleet.Last(0);
  ASSERT_EQ(list.workers().workers_size(), 1000);
  for (int id = 0; id < 1000; ++id) EXPECT_EQ(list.workers().workers(id).info().worker_id(), id);
}

TEST(JobMasterServer, ImmediateListsWhoJoinedAllJoinedWaitsForEveryone) {
  TestMaster master(JobmasterServerConfig(1000));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1000, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(500), JobmasterServerDeadline()).ok());
  fleet.ClearResponses();
  fleet.Queue(0, ListRequest(pb::IMMEDIATE));
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  EXPECT_EQ(fleet.Last(0).workers().workers_size(), 500);
  EXPECT_EQ(fleet.Last(0).workers().num_workers(), 1000);
  fleet.ClearResponses();
  for (int i = 0; i < 500; ++i) fleet.Queue(i, ListRequest(pb::RESPONSE_AFTER_ALL_JOINED));
  // The second half registers; every waiting list then comes with all 1000.
  pb::JobMasterRequest start;
  for (int i = 500; i < 1000; ++i) {
    start.mutable_starting()->mutable_info()->set_worker_id(i);
    fleet.Queue(i, start);
  }
  ASSERT_TRUE(fleet.Exchange(1000, JobmasterServerDeadline()).ok());
  for (int i = 0; i < 500; ++i) {
    pb::JobMasterResponse r = fleet.Last(i);
    ASSERT_TRUE(r.has_workers()) << r.DebugString();
    EXPECT_EQ(r.request_id(), 55u);
    EXPECT_EQ(r.workers().workers_size(), 1000);
  }
}

TEST(JobMasterServer, AllJoinedListTimesOutNamingTheMissingWorkers) {
  TestMaster master(JobmasterServerConfig(3));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(2, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll({0, 1}, JobmasterServerDeadline()).ok());
  fleet.Queue(0, ListRequest(pb::RESPONSE_AFTER_ALL_JOINED, 30));
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  pb::JobMasterResponse r = fleet.Last(0);
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(r.error().message(), HasSubstr("2 of 3 joined; missing: 2"));
}

TEST(JobMasterServer, HundredConsecutiveBarriers) {
  TestMaster master(JobmasterServerConfig(100));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(100, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(100), JobmasterServerDeadline()).ok());
  for (int b = 0; b < 100; ++b) {
    fleet.ClearResponses();
    ASSERT_TRUE(fleet.BarrierAll(100, JobmasterServerDeadline()).ok()) << "barrier " << b;
    for (int i = 0; i < 100; ++i) {
      pb::JobMasterResponse r = fleet.Last(i);
      ASSERT_TRUE(r.has_barrier()) << r.DebugString();
      ASSERT_EQ(r.barrier().generation(), b);
    }
  }
  EXPECT_EQ(master.Read<int>([](const MasterState& s) { return s.barrier_waiting(); }), 0);
}

TEST(JobMasterServer, BarriersOfAThousandWorkers) {
  TestMaster master(JobmasterServerConfig(1000));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1000, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(1000), JobmasterServerDeadline()).ok());
  for (int b = 0; b < 5; ++b) {
    fleet.ClearResponses();
    ASSERT_TRUE(fleet.BarrierAll(1000, JobmasterServerDeadline()).ok());
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(fleet.Last(i).barrier().generation(), b);
  }
}

TEST(JobMasterServer, WorkerDyingMidBarrierFailsItForEveryoneAfterMissedPings) {
  JobMasterConfig config = JobmasterServerConfig(50);
  config.ping_interval = absl::Milliseconds(10);
  config.ping_misses = 3;
  config.max_restarts = 1;
  TestMaster master(config);
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(50, JobmasterServerDeadline()).ok());
  // Workers 0..48 do not ping (so only worker 49 can miss pings) and wait
  // in a barrier that worker 49 never enters.
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(49), JobmasterServerDeadline()).ok());
  fleet.ClearResponses();
  pb::JobMasterRequest barrier;
  barrier.mutable_barrier();
  for (int i = 0; i < 49; ++i) fleet.Queue(i, barrier);
  ASSERT_TRUE(fleet.Exchange(0, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(master.WaitUntil([](const MasterState& s) { return s.barrier_waiting() == 49; }));
  pb::JobMasterRequest start;
  start.mutable_starting()->set_pings(true);
  start.mutable_starting()->mutable_info()->set_worker_id(49);
  fleet.Queue(49, start);
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  fleet.Close(49);  // dies without a word
  ASSERT_TRUE(fleet.Exchange(49, JobmasterServerDeadline()).ok());
  for (int i = 0; i < 49; ++i) {
    pb::JobMasterResponse r = fleet.Last(i);
    ASSERT_TRUE(r.has_error()) << r.DebugString();
    EXPECT_EQ(r.error().code(), static_cast<int>(absl::StatusCode::kAborted));
    EXPECT_THAT(r.error().message(), HasSubstr("worker 49 reached ERROR (no ping for"));
  }
  EXPECT_EQ(master.Read<int>([](const MasterState& s) { return s.StateOf(49); }), pb::ERROR);
  EXPECT_EQ(master.terminator().calls(), 0);  // worker 49 still has a restart left
}

TEST(JobMasterServer, CompletedWorkerFailsTheBarrierOthersWaitOn) {
  TestMaster master(JobmasterServerConfig(4));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(4, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(4), JobmasterServerDeadline()).ok());
  fleet.ClearResponses();
  pb::JobMasterRequest barrier;
  barrier.mutable_barrier();
  for (int i = 0; i < 3; ++i) fleet.Queue(i, barrier);
  ASSERT_TRUE(fleet.Exchange(0, JobmasterServerDeadline()).ok());  // sent; no answer while they wait
  // Worker 3 completes once the three wait (sent together, its report could
  // arrive first, and the later barriers be refused as unable to complete).
  absl::Time deadline = JobmasterServerDeadline();
  while (master.Read<int>([](const MasterState& s) { return s.barrier_waiting(); }) < 3) {
    ASSERT_LT(absl::Now(), deadline) << "the three barriers never arrived";
    absl::SleepFor(absl::Milliseconds(1));
  }
  fleet.Queue(3, StateRequest(pb::COMPLETED));
  ASSERT_TRUE(fleet.Exchange(4, JobmasterServerDeadline()).ok());
  EXPECT_EQ(fleet.Last(3).state().state(), pb::COMPLETED);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(fleet.Last(i).error().message(),
                HasSubstr("barrier failed: worker 3 reached COMPLETED"));
  }
  // A later barrier is refused at once rather than hanging.
  fleet.Queue(0, barrier);
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  EXPECT_THAT(fleet.Last(0).error().message(), HasSubstr("worker 3 is COMPLETED"));
}

TEST(JobMasterServer, BarrierTimesOutNamingWhoIsMissing) {
  TestMaster master(JobmasterServerConfig(3));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(3, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(3), JobmasterServerDeadline()).ok());
  pb::JobMasterRequest barrier;
  barrier.mutable_barrier()->set_timeout_ms(20);
  fleet.Queue(0, barrier);
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  EXPECT_EQ(fleet.Last(0).error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(fleet.Last(0).error().message(), HasSubstr("1 of 3 workers arrived; missing: 1, 2"));
}

TEST(JobMasterServer, SilentWorkerBecomesErrorAndEndsTheJobFailed) {
  JobMasterConfig config = JobmasterServerConfig(2);
  config.ping_interval = absl::Milliseconds(10);
  config.ping_misses = 2;
  TestMaster master(config);
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(2, JobmasterServerDeadline()).ok());
  pb::JobMasterRequest start;
  start.mutable_starting()->set_pings(true);
  start.mutable_starting()->mutable_info()->set_worker_id(1);
  fleet.Queue(1, start);
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, JobOutcome::kFailed);
  EXPECT_THAT(end->reason, HasSubstr("worker 1 ended in ERROR after 0 of 0 restarts: no ping for"));
  EXPECT_THAT(master.Read<std::string>([](const MasterState& s) { return s.ReasonOf(1); }),
              HasSubstr("2 missed pings"));
}

TEST(JobMasterServer, PingingWorkerStaysRunning) {
  // Time is a fake clock that moves only below, so how fast this machine
  // runs cannot decide who missed a ping.
  JobMasterConfig config = JobmasterServerConfig(2);
  config.ping_interval = absl::Milliseconds(20);
  config.ping_misses = 5;  // silent for more than 100 ms: ERROR
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  TestMaster master(config, &clock);
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(2, JobmasterServerDeadline()).ok());
  pb::JobMasterRequest start;
  start.mutable_starting()->set_pings(true);
  for (int i = 0; i < 2; ++i) {
    start.mutable_starting()->mutable_info()->set_worker_id(i);
    fleet.Queue(i, start);
  }
  ASSERT_TRUE(fleet.Exchange(2, JobmasterServerDeadline()).ok());
  fleet.Queue(0, StateRequest(pb::RUNNING));
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  // Worker 0 pings once per ping interval for 120 ms; worker 1 falls silent.
  // Pings have no answer: the list request behind each one (answered in
  // order on the same connection) shows the master has read it.
  pb::JobMasterRequest ping;
  ping.mutable_ping();
  for (int beat = 1; beat <= 6; ++beat) {
    clock.Advance(config.ping_interval);
    fleet.Queue(0, ping);
    fleet.Queue(0, ListRequest(pb::IMMEDIATE));
    ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok()) << "beat " << beat;
  }
  // Judged at 120 ms: at 100 ms worker 1 was still within its 5 pings.
  ASSERT_TRUE(master.WaitUntil([](const MasterState& s) { return s.StateOf(1) == pb::ERROR; }));
  EXPECT_EQ(master.Read<std::string>([](const MasterState& s) { return s.ReasonOf(1); }),
            "no ping for 120 ms (5 missed pings at an interval of 20 ms)");
  EXPECT_EQ(master.Read<int>([](const MasterState& s) { return s.StateOf(0); }), pb::RUNNING);
}

TEST(JobMasterServer, JobSucceedsOnceEveryWorkerCompleted) {
  TestMaster master(JobmasterServerConfig(1000));
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1000, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(1000), JobmasterServerDeadline()).ok());
  for (int i = 0; i < 1000; ++i) fleet.Queue(i, StateRequest(pb::RUNNING));
  ASSERT_TRUE(fleet.Exchange(1000, JobmasterServerDeadline()).ok());
  for (int i = 0; i < 999; ++i) fleet.Queue(i, StateRequest(pb::COMPLETED));
  ASSERT_TRUE(fleet.Exchange(999, JobmasterServerDeadline()).ok());
  EXPECT_EQ(master.terminator().calls(), 0);
  fleet.Queue(999, StateRequest(pb::COMPLETED));
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  EXPECT_EQ(fleet.Last(999).state().state(), pb::COMPLETED);
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, JobOutcome::kSucceeded);
  EXPECT_EQ(end->job, "mnist");
  EXPECT_EQ(end->reason, "all 1000 workers COMPLETED");
  EXPECT_EQ(master.terminator().calls(), 1);
}

TEST(JobMasterServer, WorkerErrorBeyondRestartBudgetFailsTheJob) {
  JobMasterConfig config = JobmasterServerConfig(2);
  config.max_restarts = 1;
  TestMaster master(config);
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(3, JobmasterServerDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(JobmasterServerRange(2), JobmasterServerDeadline()).ok());
  fleet.Queue(1, StateRequest(pb::ERROR, "CUDA out of memory"));
  ASSERT_TRUE(fleet.Exchange(1, JobmasterServerDeadline()).ok());
  EXPECT_EQ(master.terminator().calls(), 0);  // one restart left
  fleet.Close(1);
  pb::JobMasterRequest start;
  start.mutable_starting()->mutable_info()->set_worker_id(1);
  fleet.Queue(2, start);
  fleet.Queue(2, StateRequest(pb::ERROR, "CUDA out of memory again"));
  ASSERT_TRUE(fleet.Exchange(2, JobmasterServerDeadline()).ok());
  auto end = master.terminator().WaitForEnd(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome, JobOutcome::kFailed);
  EXPECT_EQ(end->reason, "worker 1 ended in ERROR after 1 of 1 restarts: CUDA out of memory again");
}

}  // namespace
}  // namespace trainyard::jobmaster
