// Bad input to a real job master over loopback: each case gets a clear error
// (or, for garbage, a closed connection) while the other workers are served.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/sim_fleet.h"
#include "jobmaster/test_master.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

absl::Time JobmasterBadInputDeadline() { return absl::Now() + absl::Seconds(20); }

constexpr int kInvalidArgument = static_cast<int>(absl::StatusCode::kInvalidArgument);
constexpr int kFailedPrecondition = static_cast<int>(absl::StatusCode::kFailedPrecondition);

// A master of 4 workers with workers 0 and 1 registered on connections 0 and
// 1; connections 2..5 are free for the bad input.
class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    JobMasterConfig config;
    config.job_name = "resnet";
    config.num_workers = 4;
    config.max_request_bytes = 4096;
    master_ = std::make_unique<TestMaster>(config);
    ASSERT_TRUE(master_->status().ok()) << master_->status();
    fleet_ = std::make_unique<SimFleet>("127.0.0.1", master_->port());
    ASSERT_TRUE(fleet_->Connect(6, JobmasterBadInputDeadline()).ok());
    ASSERT_TRUE(fleet_->RegisterAll({0, 1}, JobmasterBadInputDeadline()).ok());
    fleet_->ClearResponses();
  }

  // Sends `request` on connection `i` and returns the answer.
  pb::JobMasterResponse Ask(int i, const pb::JobMasterRequest& request) {
    fleet_->Queue(i, request);
    EXPECT_TRUE(fleet_->Exchange(1, JobmasterBadInputDeadline()).ok());
    return fleet_->Last(i);
  }
  pb::JobMasterResponse Starting(int i, int worker_id, std::string ip) {
    pb::JobMasterRequest r;
    r.set_request_id(9);
    r.mutable_starting()->mutable_info()->set_worker_id(worker_id);
    r.mutable_starting()->mutable_info()->set_ip(ip);
    return Ask(i, r);
  }
  // The registered workers are still served: a list answers on connection 0.
  void ExpectOthersServed() {
    pb::JobMasterRequest r;
    r.mutable_list_workers();
    pb::JobMasterResponse list = Ask(0, r);
    ASSERT_TRUE(list.has_workers()) << list.DebugString();
    EXPECT_EQ(list.workers().workers_size(), 2);
  }
  // Sends raw bytes on connection `i`, expects an error frame then a close.
  std::string GarbageError(int i, std::string_view bytes) {
    fleet_->QueueRaw(i, bytes);
    EXPECT_TRUE(fleet_->Exchange(1, JobmasterBadInputDeadline()).ok());
    pb::JobMasterResponse r = fleet_->Last(i);
    EXPECT_EQ(r.error().code(), kInvalidArgument);
    // The master closes after the error: wait for the end of the stream.
    EXPECT_TRUE(fleet_->AwaitClosedByPeer(i, JobmasterBadInputDeadline()));
    return r.error().message();
  }

  std::unique_ptr<TestMaster> master_;
  std::unique_ptr<SimFleet> fleet_;
};

TEST_F(BadInput, RunningBeforeStartingIsRefused) {
  pb::JobMasterRequest r;
  r.set_request_id(3);
  r.mutable_state_change()->set_state(pb::RUNNING);
  pb::JobMasterResponse answer = Ask(2, r);
  EXPECT_EQ(answer.request_id(), 3u);
  EXPECT_EQ(answer.error().code(), kFailedPrecondition);
  EXPECT_THAT(answer.error().message(),
              HasSubstr("got RUNNING before STARTING: the first message on a connection must be "
                        "STARTING"));
  ExpectOthersServed();
}

TEST_F(BadInput, IdOutsideTheJobIsRefused) {
  pb::JobMasterResponse answer = Starting(2, 4, "10.0.0.9");
  EXPECT_EQ(answer.error().code(), kInvalidArgument);
  EXPECT_EQ(answer.error().message(),
            "worker_id 4 is outside 0..3 (job resnet has 4 workers; -1 asks for the next free "
            "id)");
  EXPECT_THAT(Starting(2, -7, "10.0.0.9").error().message(), HasSubstr("worker_id -7 is outside"));
  ExpectOthersServed();
}

TEST_F(BadInput, AttachToAnUnknownWorkerIsRefused) {
  pb::JobMasterRequest r;
  r.mutable_attach()->set_worker_id(3);
  EXPECT_EQ(Ask(2, r).error().message(),
            "worker 3 has not registered (state UNASSIGNED): it must send STARTING first");
  r.mutable_attach()->set_worker_id(11);
  EXPECT_THAT(Ask(2, r).error().message(), HasSubstr("ATTACH worker_id 11 is outside 0..3"));
  r.mutable_attach()->set_worker_id(1);
  pb::JobMasterResponse ok = Ask(2, r);
  EXPECT_EQ(ok.registered().worker_id(), 1);
  EXPECT_EQ(ok.registered().state(), pb::STARTING);
}

// Which host a STARTING comes from is its connection's address, never the
// address it names (a stranger could name any): a worker's STARTING from its
// own host is its restart, whatever it names; one from another host is
// refused while the first connection lives (MasterStateTest.
// TheSameAddressRuleUsesTheConnectionsAddressNotTheOneItNames).
TEST_F(BadInput, AStartingFromTheWorkersOwnHostIsItsRestartWhateverAddressItNames) {
  pb::JobMasterResponse again = Starting(2, 1, "10.0.0.9");
  ASSERT_TRUE(again.has_registered()) << again.DebugString();
  EXPECT_EQ(again.registered().worker_id(), 1);
  EXPECT_EQ(master_->Read<int>([](const MasterState& s) { return s.RestartsOf(1); }), 1);
}

TEST_F(BadInput, ReportingStartingOrUnassignedAsAStateIsRefused) {
  pb::JobMasterRequest r;
  r.mutable_state_change()->set_state(pb::STARTING);
  EXPECT_THAT(Ask(0, r).error().message(), HasSubstr("STARTING is announced with a Starting"));
  r.mutable_state_change()->set_state(pb::UNASSIGNED);
  EXPECT_THAT(Ask(0, r).error().message(),
              HasSubstr("state UNASSIGNED cannot be reported: send RUNNING, COMPLETED or ERROR"));
  r.mutable_state_change()->set_state(pb::COMPLETED);
  EXPECT_EQ(Ask(0, r).state().state(), pb::COMPLETED);
  r.mutable_state_change()->set_state(pb::RUNNING);
  EXPECT_EQ(Ask(0, r).error().message(),
            "worker 0 is COMPLETED; it can only re-register with STARTING");
}

TEST_F(BadInput, EmptyRequestIsRefusedAndTheConnectionKept) {
  pb::JobMasterRequest empty;
  empty.set_request_id(5);
  EXPECT_THAT(Ask(0, empty).error().message(), HasSubstr("request has no body"));
  ExpectOthersServed();
}

TEST_F(BadInput, OversizedFrameClosesTheConnection) {
  std::string message = GarbageError(2, std::string("\x00\x10\x00\x00", 4));
  EXPECT_EQ(message,
            "frame length 1048576 exceeds the limit of 4096 bytes (is the peer speaking the "
            "job-master protocol: 4-byte big-endian length + protobuf?)");
  ExpectOthersServed();
}

TEST_F(BadInput, HttpOnTheMasterPortClosesTheConnection) {
  EXPECT_THAT(GarbageError(2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
              HasSubstr("frame length 1195725856 exceeds the limit"));
  ExpectOthersServed();
}

TEST_F(BadInput, NonProtobufPayloadClosesTheConnection) {
  std::string frame("\x00\x00\x00\x06\xff\xff\xff\xff\xff\xff", 10);
  EXPECT_EQ(GarbageError(2, frame), "a frame of 6 bytes is not a JobMasterRequest protobuf");
  ExpectOthersServed();
}

TEST_F(BadInput, GarbageFromARegisteredWorkerDropsItsBarrierWait) {
  pb::JobMasterRequest barrier;
  barrier.mutable_barrier();
  fleet_->Queue(1, barrier);
  ASSERT_TRUE(fleet_->Exchange(0, JobmasterBadInputDeadline()).ok());
  ASSERT_TRUE(master_->WaitUntil([](const MasterState& s) { return s.barrier_waiting() == 1; }));
  GarbageError(1, std::string("\x00\x00\x00\x02\xff\xff", 6));
  EXPECT_EQ(master_->Read<int>([](const MasterState& s) { return s.barrier_waiting(); }), 0);
  ExpectOthersServed();
}

}  // namespace
}  // namespace trainyard::jobmaster
