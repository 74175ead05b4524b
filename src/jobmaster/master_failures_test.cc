// A failed worker with a server behind the master: the master hands the
// failure on (JobTerminator::WorkerFailed) instead of ending the job with a
// budget of its own, so the task's restart policy decides; without one, it
// keeps its own max_restarts.
#include <vector>

#include "gtest/gtest.h"
#include "jobmaster/master_state.h"

namespace trainyard::jobmaster {
namespace {

class NullOutbox : public Outbox {
 public:
  void Send(ConnId, const pb::JobMasterResponse&) override {}
  void SendShared(ConnId, uint64_t, int, const SharedBody&) override {}
};

// Takes failures on, as ServerJobTerminator does.
class DelegatingTerminator : public FakeJobTerminator {
 public:
  bool WorkerFailed(const WorkerFailure& f) override {
    failures.push_back(f);
    return true;
  }
  std::vector<WorkerFailure> failures;
};

void Start(MasterState& state, ConnId conn, int id, int attempt, absl::Time now) {
  pb::JobMasterRequest r;
  r.mutable_starting()->mutable_info()->set_worker_id(id);
  r.mutable_starting()->set_pings(true);
  r.mutable_starting()->set_restart_count(attempt);
  state.OnRequest(conn, "10.0.0.1", r, now);
}

JobMasterConfig MasterFailuresConfig() {
  JobMasterConfig c;
  c.job_name = "bert";
  c.num_workers = 2;
  c.ping_interval = absl::Seconds(1);
  c.ping_misses = 3;
  return c;  // max_restarts 0: a master on its own fails the job at once
}

TEST(MasterFailuresTest, AMissedPingWorkerIsHandedToTheServerAndTheJobGoesOn) {
  DelegatingTerminator terminator;
  NullOutbox outbox;
  MasterState state(MasterFailuresConfig(), &terminator, &outbox);
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  Start(state, 1, 0, /*attempt=*/0, now);
  Start(state, 2, 1, /*attempt=*/2, now);
  now += absl::Seconds(4);
  state.OnTick(now);
  ASSERT_EQ(terminator.failures.size(), 2u);
  EXPECT_EQ(terminator.failures[1].worker_id, 1);
  EXPECT_EQ(terminator.failures[1].attempt, 2) << "the attempt it registered with";
  EXPECT_EQ(terminator.failures[1].job, "bert");
  EXPECT_EQ(terminator.failures[0].reason, "no ping for 4 s (3 missed pings at an interval of 1 s)");
  EXPECT_FALSE(state.job_end().has_value()) << "the server's restart policy decides, not the master";
  // Restarted by its agent, the worker registers again and the job can end well.
  Start(state, 3, 0, /*attempt=*/1, now);
  EXPECT_EQ(state.StateOf(0), pb::STARTING);
}

TEST(MasterFailuresTest, AMasterWithoutAServerKeepsItsOwnBudget) {
  FakeJobTerminator terminator;
  NullOutbox outbox;
  MasterState state(MasterFailuresConfig(), &terminator, &outbox);
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  Start(state, 1, 0, 0, now);
  state.OnTick(now + absl::Seconds(4));
  ASSERT_TRUE(state.job_end().has_value());
  EXPECT_EQ(state.job_end()->outcome, JobOutcome::kFailed);
}

}  // namespace
}  // namespace trainyard::jobmaster
