// MasterState driven directly with simulated time: exact ping deadlines,
// barrier timeouts and rebuilding the state after a master restart.
#include "jobmaster/master_state.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

// Keeps the last response per connection.
class RecordingOutbox : public Outbox {
 public:
  void Send(ConnId conn, const pb::JobMasterResponse& response) override {
    last[conn] = response;
  }
  void SendShared(ConnId conn, uint64_t request_id, int body_field,
                  const SharedBody& body) override {
    pb::JobMasterResponse& r = last[conn];
    r.Clear();
    r.set_request_id(request_id);
    if (body_field == pb::JobMasterResponse::kTableFieldNumber) {
      r.mutable_table()->ParseFromString(*body);
    } else {
      r.mutable_workers()->ParseFromString(*body);
    }
    bodies[conn] = body;
  }
  std::map<ConnId, SharedBody> bodies;  // the shared bytes each answer carried
  std::map<ConnId, pb::JobMasterResponse> last;
};

class MasterStateTest : public ::testing::Test {
 protected:
  MasterStateTest() {
    config_.job_name = "bert";
    config_.num_workers = 3;
    config_.ping_interval = absl::Seconds(1);
    config_.ping_misses = 3;
    config_.max_restarts = 5;
  }
  void Start(ConnId conn, int id, bool pings, pb::WorkerState resume = pb::UNASSIGNED) {
    pb::JobMasterRequest r;
    r.mutable_starting()->mutable_info()->set_worker_id(id);
    r.mutable_starting()->set_pings(pings);
    r.mutable_starting()->set_resume_state(resume);
    state_->OnRequest(conn, "10.0.0.1", r, now_);
  }
  void Request(ConnId conn, pb::JobMasterRequest r) { state_->OnRequest(conn, "10.0.0.1", r, now_); }

  JobMasterConfig config_;
  FakeJobTerminator terminator_;
  RecordingOutbox outbox_;
  std::unique_ptr<MasterState> state_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

TEST_F(MasterStateTest, WorkerBecomesErrorJustAfterItsLastAllowedPing) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, /*pings=*/true);
  now_ += absl::Seconds(3);
  state_->OnTick(now_);
  EXPECT_EQ(state_->StateOf(0), pb::STARTING);
  now_ += absl::Milliseconds(600);
  state_->OnTick(now_);
  EXPECT_EQ(state_->StateOf(0), pb::ERROR);
  EXPECT_EQ(state_->ReasonOf(0), "no ping for 3.6 s (3 missed pings at an interval of 1 s)");
}

TEST_F(MasterStateTest, PingsKeepAWorkerAliveAndWorkersWithoutPingsAreNeverFailed) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, true);
  Start(2, 1, false);
  pb::JobMasterRequest ping;
  ping.mutable_ping();
  for (int i = 0; i < 20; ++i) {
    now_ += absl::Seconds(1);
    Request(1, ping);
    state_->OnTick(now_);
  }
  EXPECT_EQ(state_->StateOf(0), pb::STARTING);
  EXPECT_EQ(state_->StateOf(1), pb::STARTING);
}

TEST_F(MasterStateTest, RetriedBarrierReplacesTheEarlierRequest) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  for (int id = 0; id < 3; ++id) Start(id + 1, id, false);
  pb::JobMasterRequest barrier;
  barrier.mutable_barrier()->set_timeout_ms(500);
  barrier.set_request_id(1);
  Request(1, barrier);
  barrier.set_request_id(2);
  Request(1, barrier);  // the worker gave up waiting and retried
  EXPECT_EQ(state_->barrier_waiting(), 1);
  now_ += absl::Milliseconds(501);
  state_->OnTick(now_);
  EXPECT_EQ(outbox_.last[1].request_id(), 2u);
  EXPECT_EQ(outbox_.last[1].error().message(),
            "barrier timed out with 1 of 3 workers arrived; missing: 1, 2");
  EXPECT_EQ(state_->barrier_waiting(), 0);
}

TEST_F(MasterStateTest, RestartedMasterRebuildsStateFromReRegistrations) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, true, pb::RUNNING);
  Start(2, 1, true, pb::COMPLETED);
  Start(3, 2, true, pb::RUNNING);
  EXPECT_EQ(state_->joined_count(), 3);
  EXPECT_EQ(state_->StateOf(0), pb::RUNNING);
  EXPECT_EQ(state_->StateOf(1), pb::COMPLETED);
  EXPECT_EQ(state_->RestartsOf(0), 0);  // resuming is not a restart
  pb::JobMasterRequest done;
  done.mutable_state_change()->set_state(pb::COMPLETED);
  Request(1, done);
  Request(3, done);
  ASSERT_TRUE(terminator_.end().has_value());
  EXPECT_EQ(terminator_.end()->outcome, JobOutcome::kSucceeded);
}

// A barrier request for generation `g` (-1: none) on `conn`.
pb::JobMasterRequest MasterStateBarrier(uint64_t request_id, int64_t g) {
  pb::JobMasterRequest r;
  r.set_request_id(request_id);
  r.mutable_barrier()->set_timeout_ms(5000);
  if (g >= 0) r.mutable_barrier()->set_generation(g);
  return r;
}

// Barrier 4 completed on the old master; worker 0 got its answer and waits on
// 5, worker 1's answer was lost and it retries 4, worker 2 had not asked yet.
TEST_F(MasterStateTest, RestartedMasterAnswersARetryOfAPassedBarrierAndMovesOn) {
  config_.learn_barriers = true;  // the master restarted without its count
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  for (int id = 0; id < 3; ++id) Start(id + 1, id, true, pb::RUNNING);
  EXPECT_EQ(outbox_.last[1].registered().barrier_generation(), 0);
  Request(1, MasterStateBarrier(10, 5));
  EXPECT_EQ(state_->barrier_generation(), 5);
  EXPECT_EQ(state_->barrier_waiting(), 1);
  pb::JobMasterRequest list;
  list.mutable_list_workers()->set_mode(pb::IMMEDIATE);
  Request(3, list);
  const pb::ListWorkersReply& listed = outbox_.last[3].workers();
  EXPECT_EQ(listed.barrier_generation(), 5);
  ASSERT_EQ(listed.workers_size(), 3);
  EXPECT_TRUE(listed.workers(0).in_barrier());
  EXPECT_FALSE(listed.workers(1).in_barrier());
  Request(2, MasterStateBarrier(11, 4));
  ASSERT_TRUE(outbox_.last[2].has_barrier()) << outbox_.last[2].DebugString();
  EXPECT_EQ(outbox_.last[2].barrier().generation(), 4);
  EXPECT_EQ(state_->barrier_waiting(), 1) << "barrier 4 passed already; it does not wait";
  Request(2, MasterStateBarrier(12, 5));
  Request(3, MasterStateBarrier(13, 5));
  for (ConnId c = 1; c <= 3; ++c) {
    ASSERT_TRUE(outbox_.last[c].has_barrier()) << c << ": " << outbox_.last[c].DebugString();
    EXPECT_EQ(outbox_.last[c].barrier().generation(), 5);
  }
  EXPECT_EQ(state_->barrier_generation(), 6);
}

// The same, with the retry of barrier 4 arriving first: it waits until a
// worker on barrier 5 shows that 4 passed.
TEST_F(MasterStateTest, RestartedMasterLetsARetryThroughOnceAWorkerIsPastIt) {
  config_.learn_barriers = true;  // the master restarted without its count
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  for (int id = 0; id < 3; ++id) Start(id + 1, id, true, pb::RUNNING);
  Request(2, MasterStateBarrier(11, 4));
  EXPECT_EQ(state_->barrier_waiting(), 1);
  EXPECT_FALSE(outbox_.last[2].has_barrier());
  Request(1, MasterStateBarrier(10, 5));
  ASSERT_TRUE(outbox_.last[2].has_barrier());
  EXPECT_EQ(outbox_.last[2].barrier().generation(), 4);
  EXPECT_EQ(state_->barrier_generation(), 5);
  EXPECT_EQ(state_->barrier_waiting(), 1);
  Request(2, MasterStateBarrier(12, 5));
  Request(3, MasterStateBarrier(13, -1));  // no generation: the barrier that is open
  EXPECT_EQ(outbox_.last[3].barrier().generation(), 5);
  EXPECT_EQ(outbox_.last[1].barrier().generation(), 5);
}

// A stranger's generation 2^62 on a master that knows the job's count is
// refused; had it been believed, every later barrier would pass at once.
TEST_F(MasterStateTest, AGenerationAheadOfTheJobIsRefusedAndLaterBarriersStillWork) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  for (int id = 0; id < 3; ++id) Start(id + 1, id, false);
  Request(1, MasterStateBarrier(7, int64_t{1} << 62));
  EXPECT_EQ(outbox_.last[1].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(outbox_.last[1].error().message(),
            "barrier generation 4611686018427387904 is ahead of job bert: it has passed 0 "
            "barrier(s), so the open barrier is generation 0");
  Request(1, MasterStateBarrier(8, 1));
  EXPECT_THAT(outbox_.last[1].error().message(), HasSubstr("barrier generation 1 is ahead"));
  EXPECT_EQ(state_->barrier_generation(), 0);
  for (int round = 0; round < 2; ++round) {
    outbox_.last.clear();
    Request(1, MasterStateBarrier(10, round));
    EXPECT_FALSE(outbox_.last[1].has_barrier()) << "waits for the other two";
    Request(2, MasterStateBarrier(11, round));
    Request(3, MasterStateBarrier(12, -1));
    for (ConnId c = 1; c <= 3; ++c) EXPECT_EQ(outbox_.last[c].barrier().generation(), round);
  }
  EXPECT_EQ(state_->barrier_generation(), 2);
}

// A master that starts knowing the job passed 4 barriers (its count kept)
// refuses 5 and waits on 4.
TEST_F(MasterStateTest, AMasterThatKeptItsCountRefusesGenerationsPastIt) {
  config_.passed_barriers = 4;
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, false, pb::RUNNING);
  EXPECT_EQ(outbox_.last[1].registered().barrier_generation(), 4);
  Request(1, MasterStateBarrier(7, 5));
  EXPECT_THAT(outbox_.last[1].error().message(),
              HasSubstr("it has passed 4 barrier(s), so the open barrier is generation 4"));
  Request(1, MasterStateBarrier(8, 3));
  EXPECT_EQ(outbox_.last[1].barrier().generation(), 3) << "a retry of a passed barrier";
}

// A restarted master that believed its workers stops believing them once a
// barrier completed on it: from then on its count is exact.
TEST_F(MasterStateTest, ALearningMasterIsExactOnceABarrierCompletedOnIt) {
  config_.learn_barriers = true;
  config_.num_workers = 1;
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, false, pb::RUNNING);
  Request(1, MasterStateBarrier(7, 3));
  EXPECT_EQ(outbox_.last[1].barrier().generation(), 3);
  Request(1, MasterStateBarrier(8, 9));
  EXPECT_THAT(outbox_.last[1].error().message(), HasSubstr("barrier generation 9 is ahead"));
  EXPECT_EQ(state_->barrier_generation(), 4);
}

TEST_F(MasterStateTest, NegativeBarrierGenerationIsRefused) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, false);
  Request(1, MasterStateBarrier(7, -1));
  pb::JobMasterRequest bad = MasterStateBarrier(8, 0);
  bad.mutable_barrier()->set_generation(-3);
  Request(1, bad);
  EXPECT_EQ(outbox_.last[1].error().message(),
            "barrier generation -3 is negative: it counts the job's barriers from 0");
  EXPECT_EQ(state_->barrier_waiting(), 1);
}

TEST_F(MasterStateTest, ResumingInErrorOrUnknownStateIsRefused) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, true, pb::ERROR);
  EXPECT_THAT(outbox_.last[1].error().message(),
              HasSubstr("resume_state ERROR is not allowed: a re-registering worker resumes "
                        "RUNNING or COMPLETED"));
  EXPECT_EQ(state_->joined_count(), 0);
}

TEST_F(MasterStateTest, AskingForAnIdWhenAllAreTakenIsRefused) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  for (int conn = 1; conn <= 3; ++conn) Start(conn, -1, false);
  EXPECT_EQ(outbox_.last[3].registered().worker_id(), 2);
  Start(4, -1, false);
  EXPECT_EQ(outbox_.last[4].error().message(),
            "all 3 worker ids of job bert are taken; a restarted worker must present its own id "
            "(TRAINYARD_WORKER_ID)");
}

TEST_F(MasterStateTest, WithoutTheJobsSecretNoWorkerCanRegisterOrAttach) {
  config_.job_secret = "s3cret";
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  pb::JobMasterRequest start;
  start.mutable_starting()->mutable_info()->set_worker_id(0);
  Request(1, start);
  EXPECT_EQ(outbox_.last[1].error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(outbox_.last[1].error().message(),
              HasSubstr("STARTING without job bert's secret: a worker shows the TRAINYARD_JOB_SECRET"));
  start.mutable_starting()->set_job_secret("s3creT");
  Request(1, start);
  EXPECT_EQ(outbox_.last[1].error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(state_->StateOf(0), pb::UNASSIGNED);

  start.mutable_starting()->set_job_secret("s3cret");
  Request(1, start);
  ASSERT_TRUE(outbox_.last[1].has_registered()) << outbox_.last[1].DebugString();
  EXPECT_EQ(state_->StateOf(0), pb::STARTING);

  // A stranger cannot attach to the registered worker and report for it.
  pb::JobMasterRequest attach;
  attach.mutable_attach()->set_worker_id(0);
  Request(2, attach);
  EXPECT_THAT(outbox_.last[2].error().message(), HasSubstr("ATTACH without job bert's secret"));
  pb::JobMasterRequest done;
  done.mutable_state_change()->set_state(pb::COMPLETED);
  Request(2, done);
  EXPECT_EQ(state_->StateOf(0), pb::STARTING);
  attach.mutable_attach()->set_job_secret("s3cret");
  Request(3, attach);
  EXPECT_TRUE(outbox_.last[3].has_registered());
}

TEST_F(MasterStateTest, TheSameAddressRuleUsesTheConnectionsAddressNotTheOneItNames) {
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  pb::JobMasterRequest start;
  start.mutable_starting()->mutable_info()->set_worker_id(0);
  start.mutable_starting()->mutable_info()->set_ip("10.0.0.1");
  state_->OnRequest(1, "10.0.0.1", start, now_);
  ASSERT_TRUE(outbox_.last[1].has_registered());
  // Another host names the worker's address: not a restart of worker 0.
  state_->OnRequest(2, "10.0.0.9", start, now_);
  EXPECT_EQ(outbox_.last[2].error().code(), static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(outbox_.last[2].error().message(),
              HasSubstr("worker 0 is already registered from 10.0.0.1 and its connection is alive; refusing "
                        "STARTING from 10.0.0.9"));
  // From the worker's own host it is.
  state_->OnRequest(3, "10.0.0.1", start, now_);
  EXPECT_TRUE(outbox_.last[3].has_registered());
}

}  // namespace
}  // namespace trainyard::jobmaster
