// MasterState's coordinated checkpoints: the server's order reaches the
// workers that checkpoint, and the terminator hears once all of them saved.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <map>

#include "absl/strings/escaping.h"
#include "common/order_mac.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/master_state.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

class AllAnswersOutbox : public Outbox {
 public:
  void Send(ConnId conn, const pb::JobMasterResponse& response) override { sent[conn].push_back(response); }
  void SendShared(ConnId, uint64_t, int, const SharedBody&) override {}
  std::map<ConnId, std::vector<pb::JobMasterResponse>> sent;
};

class MasterCheckpointTest : public ::testing::Test {
 protected:
  MasterCheckpointTest() {
    config_.job_name = "bert";
    config_.num_workers = 3;
    config_.max_restarts = 5;
    state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  }
  void Start(ConnId conn, int id, bool checkpoints) {
    pb::JobMasterRequest r;
    r.mutable_starting()->mutable_info()->set_worker_id(id);
    r.mutable_starting()->set_pings(true);
    r.mutable_starting()->set_checkpoints(checkpoints);
    state_->OnRequest(conn, "10.0.0.1", r, now_);
  }
  pb::JobMasterResponse Ask(ConnId conn, pb::JobMasterRequest r) {
    r.set_request_id(77);
    state_->OnRequest(conn, "10.0.0.1", r, now_);
    return outbox_.sent[conn].back();
  }
  pb::JobMasterResponse Done(ConnId conn, int64_t order, int64_t step) {
    pb::JobMasterRequest r;
    r.mutable_checkpoint_done()->set_id(order);
    r.mutable_checkpoint_done()->set_step(step);
    return Ask(conn, r);
  }
  pb::JobMasterResponse Poll(ConnId conn) {
    pb::JobMasterRequest r;
    r.mutable_checkpoint_poll();
    return Ask(conn, r);
  }
  static pb::CheckpointOrder Order(int64_t id) {
    pb::CheckpointOrder o;
    o.set_id(id);
    o.set_deadline_unix_ms(1'000'030'000);
    o.set_reason("preempted by job 9");
    return o;
  }

  JobMasterConfig config_;
  FakeJobTerminator terminator_;
  AllAnswersOutbox outbox_;
  std::unique_ptr<MasterState> state_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

TEST_F(MasterCheckpointTest, TheOrderIsPushedToCheckpointingWorkersAndAnsweredWithTheLowestStepOnceAllSaved) {
  Start(1, 0, true);
  Start(2, 1, true);
  Start(3, 2, false);  // a parameter server: it never checkpoints
  state_->OnCheckpointOrder(Order(1), now_);
  // Pushed unsolicited (request id 0) to the two that checkpoint, not the third.
  ASSERT_EQ(outbox_.sent[1].back().request_id(), 0u);
  EXPECT_EQ(outbox_.sent[1].back().checkpoint().reason(), "preempted by job 9");
  EXPECT_EQ(outbox_.sent[2].back().checkpoint().id(), 1);
  EXPECT_FALSE(outbox_.sent[3].back().has_checkpoint());

  now_ += absl::Seconds(2);  // past the window in which the third could say it checkpoints
  EXPECT_EQ(Done(1, 1, 1200).checkpoint().id(), 1);
  EXPECT_TRUE(terminator_.checkpoints().empty()) << "worker 1 has not saved yet";
  Done(2, 0, 1180);  // 0: the open order
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  CheckpointResult r = terminator_.checkpoints()[0];
  EXPECT_EQ(r.job, "bert");
  EXPECT_EQ(r.order_id, 1);
  EXPECT_TRUE(r.saved);
  EXPECT_EQ(r.step, 1180);
  EXPECT_EQ(r.workers, 2);
  // The server repeats the order until the job stops: told once.
  state_->OnCheckpointOrder(Order(1), now_);
  EXPECT_EQ(terminator_.checkpoints().size(), 1u);
}

TEST_F(MasterCheckpointTest, AStepIsTheJobsOnlyOnceEveryWorkerJoined) {
  Start(1, 0, true);
  Start(2, 1, true);
  state_->OnCheckpointOrder(Order(1), now_);
  Done(1, 1, 30);
  Done(2, 1, 31);
  EXPECT_TRUE(terminator_.checkpoints().empty()) << "worker 2 has not joined: it may checkpoint too";
  Start(3, 2, true);
  Done(3, 1, 29);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_EQ(terminator_.checkpoints()[0].step, 29);
}

TEST_F(MasterCheckpointTest, AShellWorkerThatPollsIsWaitedFor) {
  config_.num_workers = 1;
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, false);
  EXPECT_EQ(Poll(1).checkpoint().id(), 0) << "no order yet";
  state_->OnCheckpointOrder(Order(3), now_);
  EXPECT_TRUE(terminator_.checkpoints().empty());
  EXPECT_EQ(Poll(1).checkpoint().id(), 3);
  Done(1, 3, 40);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_EQ(terminator_.checkpoints()[0].step, 40);
  EXPECT_EQ(Poll(1).checkpoint().id(), 0) << "saved for it: not asked again";
}

TEST_F(MasterCheckpointTest, AJobWhoseWorkersDoNotCheckpointIsAnsweredOnceTheyHadTheirWindowToSaySo) {
  Start(1, 0, false);
  state_->OnCheckpointOrder(Order(1), now_);
  EXPECT_TRUE(terminator_.checkpoints().empty()) << "a worker may poll within the window";
  state_->OnTick(now_ + config_.checkpoint_declare_window - absl::Milliseconds(1));
  EXPECT_TRUE(terminator_.checkpoints().empty());
  state_->OnTick(now_ + config_.checkpoint_declare_window);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_FALSE(terminator_.checkpoints()[0].saved);
}

// An order pushed the moment a job starts: its shell workers have not
// joined, or not polled, yet. The one that polls within the window is
// waited for; the verdict is not "none checkpoints".
TEST_F(MasterCheckpointTest, AWorkerThatPollsSoonAfterAnEarlyOrderIsWaitedFor) {
  config_.num_workers = 2;
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  state_->OnCheckpointOrder(Order(2), now_);  // before anyone joined
  Start(1, 0, false);
  Start(2, 1, false);
  now_ += absl::Milliseconds(300);
  state_->OnTick(now_);
  EXPECT_EQ(Poll(1).checkpoint().id(), 2);
  EXPECT_EQ(Poll(2).checkpoint().id(), 2);
  now_ += absl::Seconds(5);
  state_->OnTick(now_);
  EXPECT_TRUE(terminator_.checkpoints().empty()) << "both poll: their saves are waited for";
  Done(1, 2, 7);
  Done(2, 2, 8);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_TRUE(terminator_.checkpoints()[0].saved);
  EXPECT_EQ(terminator_.checkpoints()[0].step, 7);
}

TEST_F(MasterCheckpointTest, AWorkerThatEndsNoLongerHoldsUpTheOrder) {
  Start(1, 0, true);
  Start(2, 1, true);
  Start(3, 2, false);
  state_->OnCheckpointOrder(Order(1), now_);
  now_ += absl::Seconds(2);
  Done(1, 1, 10);
  pb::JobMasterRequest error;
  error.mutable_state_change()->set_state(pb::ERROR);
  error.mutable_state_change()->set_reason("segfault");
  Ask(2, error);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_EQ(terminator_.checkpoints()[0].workers, 1);
}

TEST_F(MasterCheckpointTest, ADoneForAnotherOrderOrANegativeStepIsRefusedNamingWhy) {
  Start(1, 0, true);
  pb::JobMasterResponse r = Done(1, 0, 5);
  ASSERT_TRUE(r.has_error());
  EXPECT_THAT(r.error().message(), HasSubstr("never ordered to checkpoint"));
  state_->OnCheckpointOrder(Order(2), now_);
  r = Done(1, 1, 5);
  ASSERT_TRUE(r.has_error());
  EXPECT_THAT(r.error().message(), HasSubstr("open order is 2"));
  r = Done(1, 2, -1);
  ASSERT_TRUE(r.has_error());
  EXPECT_THAT(r.error().message(), HasSubstr("checkpoint_done.step"));
  EXPECT_TRUE(terminator_.checkpoints().empty());
}

TEST_F(MasterCheckpointTest, AWorkerThatRegistersWhileAnOrderIsOpenHearsOfItAtOnce) {
  Start(1, 0, true);
  Start(2, 1, false);
  Poll(2);  // a shell worker: waited for
  state_->OnCheckpointOrder(Order(1), now_);
  Start(5, 0, true);  // worker 0 reconnected (its master link came back)
  EXPECT_EQ(outbox_.sent[5].back().checkpoint().id(), 1);
  EXPECT_EQ(outbox_.sent[5].back().request_id(), 0u);
}

// Within the window a joined worker that has not polled yet holds up even a
// verdict others already saved for: it may checkpoint too.
TEST_F(MasterCheckpointTest, AWorkerThatHasNotPolledYetHoldsUpTheVerdictWithinTheWindow) {
  config_.num_workers = 2;
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, true);
  Start(2, 1, false);
  state_->OnCheckpointOrder(Order(6), now_);
  Done(1, 6, 40);
  EXPECT_TRUE(terminator_.checkpoints().empty()) << "worker 1 may poll within the window";
  now_ += absl::Milliseconds(500);
  EXPECT_EQ(Poll(2).checkpoint().id(), 6);
  Done(2, 6, 38);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_EQ(terminator_.checkpoints()[0].step, 38);
  EXPECT_EQ(terminator_.checkpoints()[0].workers, 2);
}

// A worker that never says so is not waited for past the window: the
// verdict goes out at the tick after it with the others' step.
TEST_F(MasterCheckpointTest, AfterTheWindowTheWorkersThatSavedDecide) {
  config_.num_workers = 2;
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, true);
  Start(2, 1, false);
  state_->OnCheckpointOrder(Order(6), now_);
  Done(1, 6, 40);
  EXPECT_TRUE(terminator_.checkpoints().empty());
  state_->OnTick(now_ + config_.checkpoint_declare_window);
  ASSERT_EQ(terminator_.checkpoints().size(), 1u);
  EXPECT_TRUE(terminator_.checkpoints()[0].saved);
  EXPECT_EQ(terminator_.checkpoints()[0].step, 40);
}

// The server's order pushed to the master's port: taken when its MAC is the
// HMAC-SHA256 of OrderMacText under the master's job token, refused
// otherwise (a worker holds the job's secret, not the token).
TEST_F(MasterCheckpointTest, AnOrderPushedToThePortIsTakenOnlyWithTheServersMac) {
  auto mac = [](const std::string& key, const std::string& job, const pb::CheckpointOrder& o) {
    std::string text = OrderMacText(job, o.id(), o.deadline_unix_ms(), o.reason());
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(text.data()),
         text.size(), md, &len);
    return absl::BytesToHexString(std::string(reinterpret_cast<const char*>(md), len));
  };
  auto push = [&](ConnId conn, const std::string& job, const pb::CheckpointOrder& o, const std::string& m) {
    pb::JobMasterRequest r;
    r.mutable_server_order()->set_job(job);
    *r.mutable_server_order()->mutable_order() = o;
    r.mutable_server_order()->set_mac(m);
    return Ask(conn, r);
  };
  // Without a key (a master run by hand) no pushed order is taken.
  pb::JobMasterResponse no_key = push(9, "bert", Order(4), mac("", "bert", Order(4)));
  EXPECT_EQ(no_key.error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(no_key.error().message(), HasSubstr("without TRAINYARD_JOB_TOKEN"));

  config_.order_key = "job-token-of-bert";
  state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  Start(1, 0, true);
  // A worker's forgery: the job's secret is not the key.
  pb::JobMasterResponse forged = push(9, "bert", Order(4), mac("the job secret", "bert", Order(4)));
  EXPECT_EQ(forged.error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(forged.error().message(), HasSubstr("server_order.mac: does not match"));
  // The MAC covers the reason: another reason under a good MAC is refused.
  pb::CheckpointOrder changed = Order(4);
  changed.set_reason("time limit");
  EXPECT_TRUE(push(9, "bert", changed, mac("job-token-of-bert", "bert", Order(4))).has_error());
  EXPECT_THAT(push(9, "gpt", Order(4), mac("job-token-of-bert", "gpt", Order(4))).error().message(),
              HasSubstr("server_order.job: 'gpt' is not this master's job bert"));
  pb::CheckpointOrder over = Order(3);
  over.set_deadline_unix_ms(absl::ToUnixMillis(now_) - 1);  // a copy of an order that ended
  EXPECT_THAT(push(9, "bert", over, mac("job-token-of-bert", "bert", over)).error().message(),
              HasSubstr("has passed"));
  EXPECT_EQ(state_->checkpoint_order().id(), 0) << "nothing refused was taken";

  pb::JobMasterResponse taken = push(9, "bert", Order(4), mac("job-token-of-bert", "bert", Order(4)));
  ASSERT_FALSE(taken.has_error()) << taken.error().message();
  EXPECT_EQ(taken.checkpoint().id(), 4);
  EXPECT_EQ(state_->checkpoint_order().id(), 4);
  // Pushed on to the worker that checkpoints, unsolicited.
  EXPECT_EQ(outbox_.sent[1].back().request_id(), 0u);
  EXPECT_EQ(outbox_.sent[1].back().checkpoint().id(), 4);
  // The same order again, from the report's answer: taken once.
  size_t pushed = outbox_.sent[1].size();
  state_->OnCheckpointOrder(Order(4), now_);
  EXPECT_EQ(outbox_.sent[1].size(), pushed);
}

}  // namespace
}  // namespace trainyard::jobmaster
