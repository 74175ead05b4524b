// LogHub with a fake backend (job places, a record of what is sent to each
// node) and a fake client stream, on a fake clock: no sockets, no threads,
// no sleeps. The hub's thread work is run by the test (RunPendingForTest).
#include "server/logs/log_hub.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/logs/test_log_backend.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

class LogHubFakeBackend : public testing::RecordingLogBackend {
 public:
  // The last subscription sent for the task's output.
  const v1::LogRead* Read(const std::string& role, int index, bool err) const {
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
      const v1::LogRead& r = it->second.read_log();
      if (it->second.has_read_log() && r.role() == role && r.index() == index && r.stderr() == err) return &r;
    }
    return nullptr;
  }
  std::set<uint64_t> Cancelled() const {
    std::set<uint64_t> ids;
    for (const auto& [node, m] : sent) {
      if (m.has_cancel_log()) ids.insert(m.cancel_log().request_id());
    }
    return ids;
  }
  std::vector<v1::LogAck> Acks() const {
    std::vector<v1::LogAck> acks;
    for (const auto& [node, m] : sent) {
      if (m.has_ack_log()) acks.push_back(m.ack_log());
    }
    return acks;
  }
};

struct LogHubFakeSink : LogSink {
  void Ready() override { ++ready; }
  int ready = 0;
};

// What a client stream saw: every chunk, and how it ended.
struct LogHubSeen {
  std::vector<v1::LogChunk> chunks;
  std::optional<absl::Status> end;
  std::string Data() const {
    std::string all;
    for (const auto& c : chunks) all += c.data();
    return all;
  }
  std::vector<int> AttemptStarts() const {
    std::vector<int> out;
    for (const auto& c : chunks) {
      if (c.attempt_start()) out.push_back(c.attempt());
    }
    return out;
  }
};

class LogHubTest : public ::testing::Test {
 protected:
  LogHubTest() { SetTask("j", {Place("worker", 0, "n1", 0)}); }

  static TaskLogPlace Place(const std::string& role, int index, const std::string& node, int attempt,
                            int launch_attempt = 0, bool done = false) {
    return {.role = role, .index = index, .node = node, .attempt = attempt, .launch_attempt = launch_attempt,
            .done = done};
  }
  void SetTask(const std::string& job, std::vector<TaskLogPlace> tasks, bool job_done = false) {
    backend_.jobs[job] = JobLogPlaces{.tasks = std::move(tasks), .job_done = job_done};
  }
  LogHub& Hub(LogHubOptions options = {}) {
    options.start_thread = false;
    hub_ = std::make_unique<LogHub>(&backend_, &clock_, options);
    return *hub_;
  }
  static v1::LogsRequest Request(bool follow, const std::string& role = "worker", int index = 0, int attempt = -1) {
    v1::LogsRequest r;
    r.set_job("j");
    r.set_role(role);
    r.set_index(index);
    r.set_attempt(attempt);
    r.set_follow(follow);
    return r;
  }
  uint64_t Open(const v1::LogsRequest& req, const std::string& user = "ana") {
    absl::StatusOr<uint64_t> id = hub_->Open(req, sink_, user);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }
  // Takes what the hub has for the follower, as a client that reads would.
  void Drain(uint64_t id, LogHubSeen& seen) {
    for (;;) {
      LogNext n = hub_->Next(id);
      if (n.kind == LogNext::Kind::kNothing) return;
      if (n.kind == LogNext::Kind::kEnd) {
        seen.end = n.end;
        return;
      }
      seen.chunks.push_back(n.chunk);
      hub_->Written(id);
    }
  }
  // The agent of `node` pushes for the last subscription of the output.
  void Push(const std::string& node, const std::string& data, bool finished = false, bool err = false,
            bool eof = false) {
    const v1::LogRead* r = backend_.Read("worker", 0, err);
    ASSERT_NE(r, nullptr);
    v1::LogData d;
    d.set_request_id(r->request_id());
    d.set_attempt(r->attempt());
    d.set_offset(r->offset() + pushed_[r->request_id()]);
    d.set_data(data);
    d.set_finished(finished);
    d.set_eof(eof || finished);
    pushed_[r->request_id()] += static_cast<int64_t>(data.size());
    EXPECT_TRUE(hub_->OnLogData(node, d));
  }

  LogHubFakeBackend backend_;
  FakeClock clock_;
  std::shared_ptr<LogHubFakeSink> sink_ = std::make_shared<LogHubFakeSink>();
  std::unique_ptr<LogHub> hub_;
  std::map<uint64_t, int64_t> pushed_;
};

TEST_F(LogHubTest, FollowSubscribesToBothOutputsAndHandsOnEachPush) {
  Hub();
  uint64_t id = Open(Request(true));
  const v1::LogRead* out = backend_.Read("worker", 0, false);
  ASSERT_NE(out, nullptr);
  EXPECT_TRUE(out->follow());
  EXPECT_EQ(out->attempt(), 0);
  EXPECT_EQ(out->offset(), 0);
  EXPECT_GT(out->window_bytes(), 0);
  ASSERT_NE(backend_.Read("worker", 0, true), nullptr);
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.AttemptStarts(), std::vector<int>{0});
  EXPECT_EQ(sink_->ready, 0);  // it took what there was; nothing new yet
  Push("n1", "step 1\n");
  EXPECT_EQ(sink_->ready, 1);
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "step 1\n");
  EXPECT_EQ(seen.chunks.back().task(), "j-worker-0");
  EXPECT_FALSE(seen.end);
}

// A log answer counts only from the node that was asked: another node's
// agent that sends the same request id (guessed, or replayed) forges nothing.
TEST_F(LogHubTest, AnAnswerFromANodeThatWasNotAskedIsDropped) {
  Hub();
  uint64_t id = Open(Request(true));
  LogHubSeen seen;
  Drain(id, seen);
  Push("n2", "forged line\n");
  pushed_.clear();  // nothing of it was taken: the real agent starts at 0
  EXPECT_EQ(sink_->ready, 0);
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "");
  Push("n1", "step 1\n");
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "step 1\n");
}

TEST_F(LogHubTest, AcknowledgesWhatTheClientTookInHalvesOfTheWindow) {
  Hub({.follower_buffer_bytes = 64 << 10});
  uint64_t id = Open(Request(true));
  int64_t window = backend_.Read("worker", 0, false)->window_bytes();
  EXPECT_EQ(window, 32 << 10);  // the follower's buffer split between its two outputs
  LogHubSeen seen;
  Push("n1", std::string(10 << 10, 'a'));
  Drain(id, seen);
  EXPECT_TRUE(backend_.Acks().empty());
  Push("n1", std::string(10 << 10, 'b'));
  EXPECT_TRUE(backend_.Acks().empty());  // not taken yet: the agent waits for the client
  Drain(id, seen);
  ASSERT_EQ(backend_.Acks().size(), 1u);
  EXPECT_EQ(backend_.Acks()[0].offset(), 20 << 10);
}

TEST_F(LogHubTest, FollowsARestartOnTheSameNodeAndEndsWhenTheJobEnds) {
  Hub();
  uint64_t id = Open(Request(true));
  LogHubSeen seen;
  Push("n1", "attempt 0\n", /*finished=*/true);
  Push("n1", "", /*finished=*/true, /*err=*/true);
  Drain(id, seen);
  EXPECT_FALSE(seen.end);  // the job goes on: it waits for the next attempt
  SetTask("j", {Place("worker", 0, "n1", 1)});
  hub_->OnJobChanged("j");
  hub_->RunPendingForTest();
  const v1::LogRead* next = backend_.Read("worker", 0, false);
  EXPECT_EQ(next->attempt(), 1);
  EXPECT_EQ(next->offset(), 0);
  EXPECT_TRUE(next->follow());
  Push("n1", "attempt 1\n");
  // The task and its job end: what is left is read to its end, not waited for.
  SetTask("j", {Place("worker", 0, "n1", 1, 0, /*done=*/true)}, /*job_done=*/true);
  hub_->OnJobChanged("j");
  hub_->RunPendingForTest();
  EXPECT_FALSE(backend_.Read("worker", 0, false)->follow());
  EXPECT_EQ(backend_.Read("worker", 0, false)->offset(), 10);
  Push("n1", "", false, false, /*eof=*/true);
  Push("n1", "", false, /*err=*/true, /*eof=*/true);
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "attempt 0\nattempt 1\n");
  EXPECT_EQ(seen.AttemptStarts(), (std::vector<int>{0, 1}));
  ASSERT_TRUE(seen.end);
  EXPECT_TRUE(seen.end->ok()) << *seen.end;
  EXPECT_EQ(hub_->Stats().subscriptions, 0u);
}

TEST_F(LogHubTest, AFollowFromTheEndThatTheJobOutrunsIsReadFromWhereTheAgentStartedNotSoughtAgain) {
  Hub();
  v1::LogsRequest req = Request(true);
  req.set_tail_lines(0);  // `attach`: from the end, as of now
  uint64_t id = Open(req);
  const v1::LogRead* first = backend_.Read("worker", 0, false);
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(first->has_tail_lines());
  const uint64_t asked = first->request_id();
  const size_t reads = backend_.sent.size();
  // The job ends before the agent's first piece came: no second seek (it
  // would start at a later end, past what the task wrote in between).
  SetTask("j", {Place("worker", 0, "n1", 0, 0, /*done=*/true)}, /*job_done=*/true);
  hub_->OnJobChanged("j");
  hub_->RunPendingForTest();
  EXPECT_EQ(backend_.sent.size(), reads);
  // The agent's first piece says where it started (offset 40, nothing yet);
  // the rest is read from there to the end, without a seek.
  for (bool err : {false, true}) {
    const v1::LogRead* r = backend_.Read("worker", 0, err);
    v1::LogData d;
    d.set_request_id(r->request_id());
    d.set_attempt(0);
    d.set_offset(40);
    d.set_next_offset(40);
    EXPECT_TRUE(hub_->OnLogData("n1", d));
  }
  hub_->RunPendingForTest();
  const v1::LogRead* rest = backend_.Read("worker", 0, false);
  EXPECT_NE(rest->request_id(), asked);
  EXPECT_FALSE(rest->follow());
  EXPECT_EQ(rest->offset(), 40);
  EXPECT_FALSE(rest->has_tail_lines());
  EXPECT_EQ(rest->since_unix_nanos(), 0);
  v1::LogData d;
  d.set_request_id(rest->request_id());
  d.set_attempt(0);
  d.set_offset(40);
  d.set_data("written after attach\n");
  d.set_eof(true);
  EXPECT_TRUE(hub_->OnLogData("n1", d));
  const v1::LogRead* rest_err = backend_.Read("worker", 0, true);
  v1::LogData e;
  e.set_request_id(rest_err->request_id());
  e.set_attempt(0);
  e.set_offset(40);
  e.set_eof(true);
  EXPECT_TRUE(hub_->OnLogData("n1", e));
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "written after attach\n");
  ASSERT_TRUE(seen.end);
  EXPECT_TRUE(seen.end->ok()) << *seen.end;
}

TEST_F(LogHubTest, StepsThroughEveryAttemptOfTheSameLaunch) {
  Hub();
  uint64_t id = Open(Request(true));
  SetTask("j", {Place("worker", 0, "n1", 2)});  // the agent restarted it twice meanwhile
  Push("n1", "", true);
  Push("n1", "", true, true);
  hub_->OnJobChanged("j");
  hub_->RunPendingForTest();
  EXPECT_EQ(backend_.Read("worker", 0, false)->attempt(), 1);
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.AttemptStarts(), (std::vector<int>{0, 1}));
}

TEST_F(LogHubTest, FollowsARelaunchOnAnotherNodeAndSaysWhatWasLeftUnread) {
  Hub();
  uint64_t id = Open(Request(true));
  Push("n1", "before the node went\n");
  hub_->OnNodeDisconnected("n1");
  SetTask("j", {Place("worker", 0, "n2", 1, /*launch_attempt=*/1)});
  hub_->OnJobChanged("j");
  hub_->RunPendingForTest();
  const v1::LogRead* moved = backend_.Read("worker", 0, false);
  EXPECT_EQ(backend_.sent.back().first, "n2");
  EXPECT_EQ(moved->attempt(), 1);
  EXPECT_EQ(moved->offset(), 0);
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.AttemptStarts(), (std::vector<int>{0, 1}));
  bool noted = false;
  for (const auto& c : seen.chunks) noted = noted || absl::StrContains(c.error(), "node n1 that keeps the log");
  EXPECT_TRUE(noted);
}

TEST_F(LogHubTest, ANodeThatReconnectsIsAskedAgainFromWhereTheStreamWas) {
  Hub();
  Open(Request(true));
  Push("n1", "12345");
  hub_->OnNodeDisconnected("n1");
  hub_->OnNodeConnected("n1");
  hub_->RunPendingForTest();
  const v1::LogRead* again = backend_.Read("worker", 0, false);
  EXPECT_EQ(again->offset(), 5);
  EXPECT_EQ(again->attempt(), 0);
}

TEST_F(LogHubTest, AFollowerOfAJobNotPlacedYetWaitsForItsTasks) {
  SetTask("j", {Place("worker", 0, "", 0)});
  Hub();
  Open(Request(true));
  EXPECT_TRUE(backend_.sent.empty());
  SetTask("j", {Place("worker", 0, "n2", 0)});
  hub_->OnJobChanged("j");
  hub_->RunPendingForTest();
  ASSERT_NE(backend_.Read("worker", 0, false), nullptr);
  EXPECT_EQ(backend_.sent.back().first, "n2");
}

TEST_F(LogHubTest, WithoutFollowItReadsToTheEndOnceAndFinishes) {
  Hub();
  uint64_t id = Open(Request(false));
  EXPECT_FALSE(backend_.Read("worker", 0, false)->follow());
  Push("n1", "all of it\n", false, false, /*eof=*/true);
  Push("n1", "", false, true, /*eof=*/true);
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "all of it\n");
  EXPECT_TRUE(seen.AttemptStarts().empty());
  ASSERT_TRUE(seen.end);
  EXPECT_TRUE(seen.end->ok());
}

TEST_F(LogHubTest, ErrorsOfOneTaskEndItsStream) {
  Hub();
  EXPECT_EQ(hub_->Open(Request(false, "ps"), sink_, "ana").status().code(), absl::StatusCode::kNotFound);
  v1::LogsRequest unknown = Request(false);
  unknown.set_job("nope");
  EXPECT_THAT(hub_->Open(unknown, sink_, "ana").status().message(), HasSubstr("'nope' does not exist"));

  SetTask("j", {Place("worker", 0, "", 0)}, /*job_done=*/true);  // killed while queued
  LogHubSeen never;
  Drain(Open(Request(false)), never);
  ASSERT_TRUE(never.end);
  EXPECT_THAT(never.end->message(), HasSubstr("j-worker-0 never ran"));

  SetTask("j", {Place("worker", 0, "n3", 0)});  // its node is not connected
  LogHubSeen away;
  Drain(Open(Request(false)), away);
  ASSERT_TRUE(away.end);
  EXPECT_EQ(away.end->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(away.end->message(), HasSubstr("node n3 that keeps the log of j-worker-0 attempt 0 is not connected"));
}

TEST_F(LogHubTest, AnAgentErrorEndsASingleTaskStreamWithIt) {
  SetTask("j", {Place("worker", 0, "n1", 7)});
  Hub();
  uint64_t id = Open(Request(false, "worker", 0, /*attempt=*/7));
  v1::LogData d;
  d.set_request_id(backend_.Read("worker", 0, false)->request_id());
  d.set_error("no log for task j/worker-0 attempt 7");
  hub_->OnLogData("n1", d);
  LogHubSeen seen;
  Drain(id, seen);
  ASSERT_TRUE(seen.end);
  EXPECT_EQ(seen.end->code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(seen.end->message(), HasSubstr("attempt 7"));
}

TEST_F(LogHubTest, ATaskOfAManyTaskStreamThatCannotBeReadIsNotedAndTheRestGoesOn) {
  SetTask("j", {Place("worker", 0, "n1", 0), Place("worker", 1, "n3", 0)});
  Hub();
  uint64_t id = Open(Request(false, "", -1));
  Push("n1", "w0\n", false, false, true);
  Push("n1", "", false, true, true);
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "w0\n");
  bool noted = false;
  for (const auto& c : seen.chunks) noted = noted || (c.task() == "j-worker-1" && !c.error().empty());
  EXPECT_TRUE(noted);
  ASSERT_TRUE(seen.end);
  EXPECT_TRUE(seen.end->ok());
}

TEST_F(LogHubTest, AnEarlierAttemptIsReadOnTheNodeThatRanItNotWhereTheTaskIsNow) {
  TaskLogPlace moved = Place("worker", 0, "n2", 1, /*launch_attempt=*/1);
  moved.launches = {{0, "n1"}, {1, "n2"}};
  SetTask("j", {moved});
  Hub();
  uint64_t id = Open(Request(false, "worker", 0, /*attempt=*/0));
  ASSERT_NE(backend_.Read("worker", 0, false), nullptr);
  EXPECT_EQ(backend_.sent.back().first, "n1");
  EXPECT_EQ(backend_.Read("worker", 0, false)->attempt(), 0);
  Push("n1", "from n1\n", false, false, /*eof=*/true);
  Push("n1", "", false, true, /*eof=*/true);
  LogHubSeen seen;
  Drain(id, seen);
  EXPECT_EQ(seen.Data(), "from n1\n");
  ASSERT_TRUE(seen.end);
  EXPECT_TRUE(seen.end->ok()) << *seen.end;
}

TEST_F(LogHubTest, AnAttemptOnALostNodeSaysWhereItRanAndThatTheNodeIsLost) {
  TaskLogPlace moved = Place("worker", 0, "n2", 1, /*launch_attempt=*/1);
  moved.launches = {{0, "n1"}, {1, "n2"}};
  SetTask("j", {moved});
  backend_.jobs["j"].node_states = {{"n1", "LOST"}, {"n2", "READY"}};
  Hub();
  LogHubSeen seen;
  Drain(Open(Request(false, "worker", 0, /*attempt=*/0)), seen);
  ASSERT_TRUE(seen.end);
  EXPECT_EQ(seen.end->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(seen.end->message(), HasSubstr("attempt 0 of j-worker-0 ran on n1, which is LOST"));
}

TEST_F(LogHubTest, WithoutFollowAJobThatHasNotStartedSaysSo) {
  SetTask("j", {Place("worker", 0, "", 0)});
  backend_.jobs["j"].pending_reason = "gang needs 8 GPUs";
  Hub();
  absl::StatusOr<uint64_t> id = hub_->Open(Request(false), sink_, "ana");
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("job j has not started yet (QUEUED: gang needs 8 GPUs)"));
  EXPECT_TRUE(hub_->Open(Request(true), sink_, "ana").ok());  // -f waits for the start
}

TEST_F(LogHubTest, RefusesOneFollowerPastTheLimitNamingIt) {
  Hub({.max_followers = 2});
  uint64_t first = Open(Request(true));
  Open(Request(true));
  absl::StatusOr<uint64_t> third = hub_->Open(Request(true), sink_, "ana");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("2 log streams, its limit (maxLogFollowers)"));
  hub_->Close(first);
  EXPECT_TRUE(hub_->Open(Request(true), sink_, "ana").ok());
  EXPECT_EQ(hub_->Stats().followers, 2);
}

// One user at their cap is refused, naming it; another user is still served
// (with the server's own total far from full), and the first user may open
// one again once one of theirs ends.
TEST_F(LogHubTest, AUserAtTheirCapIsRefusedWhileAnotherIsServed) {
  Hub({.max_followers = 100, .max_followers_per_user = 3});
  std::vector<uint64_t> hers;
  for (int i = 0; i < 3; ++i) hers.push_back(Open(Request(true), "mallory"));
  absl::StatusOr<uint64_t> more = hub_->Open(Request(true), sink_, "mallory");
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(more.status().message(),
              HasSubstr("you ('mallory') already have 3 log streams open, the most one user may (logStreams.perUser 3)"));
  // Plain reads count too: they hold a stream while they read.
  EXPECT_EQ(hub_->Open(Request(false), sink_, "mallory").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(hub_->Open(Request(true), sink_, "ana").ok());
  EXPECT_TRUE(hub_->Open(Request(false), sink_, "ana").ok());
  LogHubStats stats = hub_->Stats();
  EXPECT_EQ(stats.refused_user, 2);
  EXPECT_EQ(stats.refused_total, 0);
  hub_->Close(hers[0]);
  EXPECT_TRUE(hub_->Open(Request(true), sink_, "mallory").ok());
}

// A stream that ends by itself (not closed by its client) gives its user's
// place back too.
TEST_F(LogHubTest, AnEndedStreamNoLongerCountsAgainstItsUser) {
  Hub({.max_followers_per_user = 1});
  uint64_t id = Open(Request(false), "mallory");
  Push("n1", "done\n", /*finished=*/true);
  Push("n1", "", /*finished=*/true, /*err=*/true);
  LogHubSeen seen;
  Drain(id, seen);
  ASSERT_TRUE(seen.end.has_value());
  EXPECT_TRUE(seen.end->ok()) << *seen.end;
  EXPECT_TRUE(hub_->Open(Request(true), sink_, "mallory").ok());
}

// One node's subscriptions: one user cannot hold more than their share, and
// others still get theirs; the node's total is kept too.
TEST_F(LogHubTest, OneUserCannotTakeAllOfANodesSubscriptions) {
  Hub({.max_followers_per_user = 0, .node_subscriptions = 10, .node_subscriptions_per_user = 4});
  uint64_t a1 = Open(Request(true), "mallory");  // stdout and stderr: 2
  Open(Request(true), "mallory");                // 4
  uint64_t a3 = Open(Request(true), "mallory");  // over her share of n1
  LogHubSeen refused;
  Drain(a3, refused);
  ASSERT_TRUE(refused.end.has_value());
  EXPECT_EQ(refused.end->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.end->message(),
              HasSubstr("you ('mallory') already hold 4 log subscriptions on node n1, the most one user may there "
                        "(logStreams.perUserPerNode 4)"));
  EXPECT_EQ(hub_->Stats().subscriptions, 4u);
  // Others are served on the same node, up to the node's total.
  uint64_t b1 = Open(Request(true), "ana");
  LogHubSeen served;
  Drain(b1, served);
  EXPECT_FALSE(served.end.has_value());
  Open(Request(true), "ana");
  Open(Request(true), "bob");  // 10: the node is full
  uint64_t c2 = Open(Request(true), "carol");
  LogHubSeen full;
  Drain(c2, full);
  ASSERT_TRUE(full.end.has_value());
  EXPECT_THAT(full.end->message(),
              HasSubstr("node n1 already serves 10 log subscriptions, the most the server opens on one node "
                        "(logStreams.perNode 10)"));
  LogHubStats stats = hub_->Stats();
  EXPECT_EQ(stats.refused_user_node, 1);
  EXPECT_EQ(stats.refused_node, 1);
  // Her streams' subscriptions given back, she may subscribe there again.
  hub_->Close(a1);
  uint64_t a4 = Open(Request(true), "mallory");
  LogHubSeen again;
  Drain(a4, again);
  EXPECT_FALSE(again.end.has_value());
}

TEST_F(LogHubTest, ClosingAStreamCancelsItsSubscriptions) {
  Hub();
  uint64_t id = Open(Request(true));
  uint64_t out = backend_.Read("worker", 0, false)->request_id();
  uint64_t err = backend_.Read("worker", 0, true)->request_id();
  hub_->Close(id);
  EXPECT_EQ(backend_.Cancelled(), (std::set<uint64_t>{out, err}));
  EXPECT_EQ(hub_->Stats().subscriptions, 0u);
  EXPECT_EQ(hub_->Stats().followers, 0);
}

TEST_F(LogHubTest, APushForASubscriptionItDroppedIsCancelledAtItsAgent) {
  Hub();
  v1::LogData stale;
  stale.set_request_id((1ull << 63) | 12345);
  stale.set_data("late");
  EXPECT_TRUE(hub_->OnLogData("n2", stale));
  EXPECT_EQ(backend_.Cancelled(), std::set<uint64_t>{stale.request_id()});
  v1::LogData not_ours;
  not_ours.set_request_id(3);  // a one-off read of the manager's
  EXPECT_FALSE(hub_->OnLogData("n2", not_ours));
}

TEST_F(LogHubTest, AReaderThatTakesNothingIsCutOffAfterTheStallTimeout) {
  Hub({.stall_timeout = absl::Seconds(10)});
  uint64_t id = Open(Request(true));
  LogHubSeen seen;
  Drain(id, seen);
  Push("n1", "never read\n");
  LogNext taken = hub_->Next(id);  // written to the transport, which never completes
  ASSERT_EQ(taken.kind, LogNext::Kind::kChunk);
  Push("n1", "nor this\n");
  clock_.Advance(absl::Seconds(9));
  hub_->SweepForTest();
  EXPECT_EQ(hub_->Stats().cut_off, 0);
  clock_.Advance(absl::Seconds(2));
  int ready = sink_->ready;
  hub_->SweepForTest();
  EXPECT_EQ(sink_->ready, ready + 1);  // told at once, though a write is in flight
  LogNext end = hub_->Next(id);
  ASSERT_EQ(end.kind, LogNext::Kind::kEnd);
  EXPECT_EQ(end.end.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(end.end.message(), HasSubstr("cut off"));
  EXPECT_THAT(end.end.message(), HasSubstr("logFollowerStallMs"));
  LogHubStats stats = hub_->Stats();
  EXPECT_EQ(stats.cut_off, 1);
  EXPECT_EQ(stats.followers, 0);  // its place is free again
  EXPECT_EQ(stats.subscriptions, 0u);
  EXPECT_EQ(stats.buffered_bytes, 0);
}

TEST_F(LogHubTest, AReaderThatKeepsReadingIsNeverCutOff) {
  Hub({.stall_timeout = absl::Seconds(10)});
  uint64_t id = Open(Request(true));
  LogHubSeen seen;
  for (int i = 0; i < 5; ++i) {
    Push("n1", "line\n");
    clock_.Advance(absl::Seconds(8));
    Drain(id, seen);
    hub_->SweepForTest();
  }
  clock_.Advance(absl::Hours(1));  // quiet task, nothing waiting
  hub_->SweepForTest();
  EXPECT_EQ(hub_->Stats().cut_off, 0);
  EXPECT_EQ(seen.Data(), "line\nline\nline\nline\nline\n");
}

TEST_F(LogHubTest, AFollowerOfManyTasksSplitsItsBufferAmongThem) {
  std::vector<TaskLogPlace> tasks;
  for (int i = 0; i < 8; ++i) tasks.push_back(Place("worker", i, "n1", 0));
  SetTask("j", tasks);
  Hub({.follower_buffer_bytes = 1 << 20});
  Open(Request(true, "", -1));
  int64_t windows = 0;
  for (const auto& [node, m] : backend_.sent) windows += m.read_log().window_bytes();
  EXPECT_EQ(backend_.sent.size(), 16u);
  EXPECT_LE(windows, 1 << 20);
}

}  // namespace
}  // namespace trainyard::server
