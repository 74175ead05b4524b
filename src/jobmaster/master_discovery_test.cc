// Discovery at scale, driven through MasterState: every worker gets the same
// complete worker table, encoded once per membership version; the version
// moves when a worker restarts and not when states change; rank 0 is
// answered once it joins.
#include <map>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/master_state.h"
#include "jobmaster/worker_table.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

// Keeps every answer per connection, and the shared bodies they carried.
class KeepingOutbox : public Outbox {
 public:
  void Send(ConnId conn, const pb::JobMasterResponse& response) override {
    got[conn].push_back(response);
  }
  void SendShared(ConnId conn, uint64_t request_id, int body_field,
                  const SharedBody& body) override {
    pb::JobMasterResponse r;
    r.set_request_id(request_id);
    if (body_field == pb::JobMasterResponse::kTableFieldNumber) {
      r.mutable_table()->ParseFromString(*body);
    } else {
      r.mutable_workers()->ParseFromString(*body);
    }
    got[conn].push_back(r);
    shared[conn] = body;
  }
  std::map<ConnId, std::vector<pb::JobMasterResponse>> got;
  std::map<ConnId, SharedBody> shared;
};

class MasterDiscoveryTest : public ::testing::Test {
 protected:
  static constexpr int kWorkers = 50;
  MasterDiscoveryTest() {
    config_.job_name = "gpt";
    config_.num_workers = kWorkers;
    config_.max_restarts = 3;
    state_ = std::make_unique<MasterState>(config_, &terminator_, &outbox_);
  }
  // Worker `id` registers on connection id + 1 (or `conn`) with port 29500 + id.
  void Start(int id, int port_offset = 0, ConnId conn = 0) {
    pb::JobMasterRequest r;
    r.mutable_starting()->mutable_info()->set_worker_id(id);
    r.mutable_starting()->mutable_info()->set_port(29500 + id + port_offset);
    r.mutable_starting()->mutable_info()->set_role("worker");
    r.mutable_starting()->mutable_info()->set_index(id);
    r.mutable_starting()->mutable_info()->set_task_name(absl::StrCat("gpt-worker-", id));
    state_->OnRequest(conn != 0 ? conn : id + 1, absl::StrCat("10.0.0.", id / 8), r, now_);
  }
  void AskTable(ConnId conn, pb::ListWorkersMode mode, int64_t known = 0) {
    pb::JobMasterRequest r;
    r.set_request_id(77);
    r.mutable_list_workers()->set_mode(mode);
    r.mutable_list_workers()->set_table(true);
    r.mutable_list_workers()->set_known_version(known);
    state_->OnRequest(conn, "", r, now_);
  }
  const pb::JobMasterResponse& Last(ConnId conn) { return outbox_.got[conn].back(); }
  std::vector<TableRow> Rows(const pb::WorkerTable& table) {
    std::vector<TableRow> rows;
    EXPECT_TRUE(DecodeWorkerTable(table, &rows).ok());
    return rows;
  }

  JobMasterConfig config_;
  FakeJobTerminator terminator_;
  KeepingOutbox outbox_;
  std::unique_ptr<MasterState> state_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

TEST_F(MasterDiscoveryTest, EveryWaiterGetsTheSameCompleteTableEncodedOnce) {
  for (int id = 0; id < kWorkers; ++id) {
    Start(id);
    AskTable(id + 1, pb::RESPONSE_AFTER_ALL_JOINED);
  }
  EXPECT_EQ(state_->table_encodings(), 1);
  for (int id = 0; id < kWorkers; ++id) {
    ASSERT_TRUE(Last(id + 1).has_table()) << "worker " << id;
    EXPECT_EQ(outbox_.shared[id + 1], outbox_.shared[1]) << "worker " << id << " got its own copy";
  }
  std::vector<TableRow> rows = Rows(Last(1).table());
  ASSERT_EQ(rows.size(), static_cast<size_t>(kWorkers));
  for (int id = 0; id < kWorkers; ++id) {
    EXPECT_EQ(rows[id].info.worker_id(), id);
    EXPECT_EQ(rows[id].info.ip(), absl::StrCat("10.0.0.", id / 8));  // the peer's address
    EXPECT_EQ(rows[id].info.port(), 29500 + id);
    EXPECT_EQ(rows[id].info.task_name(), absl::StrCat("gpt-worker-", id));
  }
}

TEST_F(MasterDiscoveryTest, AWorkerRestartAdvancesTheVersionAndStateChangesDoNot) {
  for (int id = 0; id < kWorkers; ++id) Start(id);
  AskTable(1, pb::IMMEDIATE);
  int64_t v1 = Last(1).table().version();
  pb::JobMasterRequest running;
  running.mutable_state_change()->set_state(pb::RUNNING);
  for (int id = 0; id < kWorkers; ++id) state_->OnRequest(id + 1, "", running, now_);
  AskTable(1, pb::IMMEDIATE, v1);
  EXPECT_TRUE(Last(1).table().unchanged());
  EXPECT_EQ(Last(1).table().version(), v1);
  EXPECT_TRUE(Last(1).table().deflated_columns().empty());

  state_->OnConnectionClosed(8);  // worker 7's process dies and comes back on a new port
  Start(7, /*port_offset=*/1000, /*conn=*/500);
  AskTable(1, pb::IMMEDIATE, v1);
  const pb::WorkerTable& table = Last(1).table();
  EXPECT_FALSE(table.unchanged());
  EXPECT_GT(table.version(), v1);
  std::vector<TableRow> rows = Rows(table);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kWorkers));
  EXPECT_EQ(rows[7].info.port(), 29500 + 7 + 1000);
  EXPECT_EQ(rows[7].restart_count, 1);
  EXPECT_EQ(state_->table_encodings(), 2);
}

TEST_F(MasterDiscoveryTest, ClassicListIsStillAnsweredWithStates) {
  for (int id = 0; id < 3; ++id) Start(id);
  pb::JobMasterRequest r;
  r.mutable_list_workers()->set_mode(pb::IMMEDIATE);
  state_->OnRequest(1, "", r, now_);
  ASSERT_TRUE(Last(1).has_workers());
  ASSERT_EQ(Last(1).workers().workers_size(), 3);
  EXPECT_EQ(Last(1).workers().workers(2).state(), pb::STARTING);
  EXPECT_TRUE(Last(1).workers().workers(2).connected());
}

TEST_F(MasterDiscoveryTest, RankZeroIsAnsweredWhenWorkerZeroJoins) {
  Start(3);
  pb::JobMasterRequest r;
  r.set_request_id(9);
  r.mutable_rank_zero()->set_timeout_ms(5000);
  state_->OnRequest(4, "", r, now_);
  EXPECT_EQ(outbox_.got[4].size(), 1u);  // only its registration so far
  Start(0);
  ASSERT_TRUE(Last(4).has_rank_zero());
  EXPECT_EQ(Last(4).request_id(), 9u);
  EXPECT_EQ(Last(4).rank_zero().info().ip(), "10.0.0.0");
  EXPECT_EQ(Last(4).rank_zero().info().port(), 29500);
  EXPECT_EQ(Last(4).rank_zero().num_workers(), kWorkers);
  state_->OnRequest(4, "", r, now_);  // once it joined: at once
  EXPECT_EQ(Last(4).rank_zero().info().port(), 29500);
}

TEST_F(MasterDiscoveryTest, RankZeroTimesOutNamingWorkerZero) {
  Start(3);
  pb::JobMasterRequest r;
  r.mutable_rank_zero()->set_timeout_ms(100);
  state_->OnRequest(4, "", r, now_);
  now_ += absl::Milliseconds(101);
  state_->OnTick(now_);
  ASSERT_TRUE(Last(4).has_error());
  EXPECT_EQ(Last(4).error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(Last(4).error().message(), HasSubstr("worker 0 of job gpt has not joined in time"));
  EXPECT_FALSE(state_->Waits(4));
}

TEST_F(MasterDiscoveryTest, AClosedWaiterIsNotAnswered) {
  for (int id = 0; id + 1 < kWorkers; ++id) {
    Start(id);
    AskTable(id + 1, pb::RESPONSE_AFTER_ALL_JOINED);
  }
  EXPECT_TRUE(state_->Waits(3));
  state_->OnConnectionClosed(3);
  EXPECT_FALSE(state_->Waits(3));
  size_t before = outbox_.got[3].size();
  Start(kWorkers - 1);
  EXPECT_EQ(outbox_.got[3].size(), before);
  EXPECT_TRUE(Last(1).has_table());
}

}  // namespace
}  // namespace trainyard::jobmaster
