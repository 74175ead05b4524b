// ExecRelay with a fake backend (job places, a record of what is sent to
// each node) and a fake client stream: no sockets, no threads.
#include "server/exec_relay.h"

#include <map>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/logs/test_log_backend.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

class FakeBackend : public testing::RecordingLogBackend {
 public:
  std::vector<v1::ExecInput> Inputs() const {
    std::vector<v1::ExecInput> out;
    for (const auto& [node, m] : sent) {
      if (m.has_exec_input()) out.push_back(m.exec_input());
    }
    return out;
  }
};

struct FakeSink : ExecSink {
  void Ready() override { ++ready; }
  int ready = 0;
};

JobLogPlaces Running() {
  JobLogPlaces p;
  p.job_id = 42;
  p.job_state = v1::JOB_RUNNING;
  p.tasks.push_back(TaskLogPlace{.role = "worker", .index = 0, .node = "n1", .attempt = 1});
  p.tasks.push_back(TaskLogPlace{.role = "worker", .index = 1, .node = "n2", .attempt = 0});
  p.tasks.push_back(TaskLogPlace{.role = "init", .index = 0, .node = "n1", .done = true});
  return p;
}

v1::ExecStart Start(const std::string& role = "worker", int index = 0) {
  v1::ExecStart s;
  s.set_job("train");
  s.set_role(role);
  s.set_index(index);
  s.add_command("sh");
  s.add_command("-c");
  s.add_command("echo hi");
  s.set_tty(true);
  s.set_rows(24);
  s.set_cols(80);
  return s;
}

v1::ExecOutput Out(uint64_t id) {
  v1::ExecOutput o;
  o.set_request_id(id);
  return o;
}

class ExecRelayTest : public ::testing::Test {
 protected:
  ExecRelayTest() : relay_(&backend_, ExecRelayOptions{.max_sessions = 3, .max_sessions_per_user = 2,
                                                         .window_bytes = 1000, .input_window_bytes = 100}) {
    backend_.jobs["train"] = Running();
  }

  // Writes every response waiting, as the stream does.
  std::vector<v1::ExecResponse> Drain(uint64_t id, absl::Status* end = nullptr) {
    std::vector<v1::ExecResponse> out;
    for (;;) {
      ExecNext next = relay_.Next(id);
      if (next.kind == ExecNext::Kind::kResponse) {
        out.push_back(next.response);
        relay_.Written(id);
        continue;
      }
      if (next.kind == ExecNext::Kind::kEnd && end != nullptr) *end = next.end;
      return out;
    }
  }

  FakeBackend backend_;
  ExecRelay relay_;
};

TEST_F(ExecRelayTest, AnOrderGoesToTheTasksNodeAndItsOutputAndEndComeBack) {
  auto sink = std::make_shared<FakeSink>();
  absl::StatusOr<uint64_t> id = relay_.Open(Start(), sink, "alice");
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(backend_.sent.size(), 1u);
  EXPECT_EQ(backend_.sent[0].first, "n1");
  const v1::ExecOpen& open = backend_.sent[0].second.exec_open();
  EXPECT_EQ(open.request_id(), *id);
  EXPECT_EQ(open.job_id(), 42u);
  EXPECT_EQ(open.role(), "worker");
  EXPECT_EQ(open.command_size(), 3);
  EXPECT_TRUE(open.tty());
  EXPECT_EQ(open.rows(), 24);
  EXPECT_EQ(open.user(), "alice");
  EXPECT_EQ(open.window_bytes(), 1000);

  // Output from another node is not this session's.
  v1::ExecOutput started = Out(*id);
  started.set_started(true);
  started.set_attempt(1);
  EXPECT_FALSE(relay_.OnExecOutput("n2", started));
  EXPECT_TRUE(relay_.OnExecOutput("n1", started));
  v1::ExecOutput data = Out(*id);
  data.set_data("hi\n");
  relay_.OnExecOutput("n1", data);
  v1::ExecOutput err = Out(*id);
  err.set_data("oops\n");
  err.set_stderr(true);
  relay_.OnExecOutput("n1", err);
  v1::ExecOutput end = Out(*id);
  end.set_exited(true);
  end.set_exit_code(3);
  relay_.OnExecOutput("n1", end);
  EXPECT_GE(sink->ready, 1);

  absl::Status status = absl::UnknownError("not ended");
  std::vector<v1::ExecResponse> got = Drain(*id, &status);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].node(), "n1");
  EXPECT_EQ(got[0].attempt(), 1);
  EXPECT_EQ(got[1].stdout(), "hi\n");
  EXPECT_EQ(got[2].stderr(), "oops\n");
  EXPECT_TRUE(got[3].exited());
  EXPECT_EQ(got[3].exit_code(), 3);
  EXPECT_TRUE(status.ok()) << status;
  relay_.Close(*id);
  // The agent's session was over: no hang-up is sent for it.
  for (const v1::ExecInput& in : backend_.Inputs()) EXPECT_FALSE(in.close());
  EXPECT_EQ(relay_.Stats().open, 0);
}

TEST_F(ExecRelayTest, ARefusalBeforeTheCommandRanIsTheStreamsError) {
  absl::StatusOr<uint64_t> id = relay_.Open(Start(), std::make_shared<FakeSink>(), "alice");
  ASSERT_TRUE(id.ok());
  v1::ExecOutput refused = Out(*id);
  refused.set_exited(true);
  refused.set_exit_code(-1);
  refused.set_error("node n1: cannot run the command sh: No such file or directory");
  relay_.OnExecOutput("n1", refused);
  absl::Status status;
  EXPECT_TRUE(Drain(*id, &status).empty());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("cannot run the command sh"));

  // The agent names the kind of a refusal (its node is full).
  uint64_t busy_id = *relay_.Open(Start(), std::make_shared<FakeSink>(), "alice");
  v1::ExecOutput busy = Out(busy_id);
  busy.set_exited(true);
  busy.set_error("node n1: node runs 64 commands in tasks already");
  busy.set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
  relay_.OnExecOutput("n1", busy);
  Drain(busy_id, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ExecRelayTest, AJobSubmittedAgainUnderTheNameIsNotTheOneAuthorized) {
  EXPECT_TRUE(relay_.Open(Start(), std::make_shared<FakeSink>(), "alice", 42).ok());
  absl::Status other = relay_.Open(Start(), std::make_shared<FakeSink>(), "alice", 41).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound);
}

TEST_F(ExecRelayTest, LargeInputGoesInPiecesAndAnAgentPastItsWindowIsCutOff) {
  uint64_t id = *relay_.Open(Start(), std::make_shared<FakeSink>(), "alice");
  v1::ExecRequest big;
  big.set_stdin(std::string(260, 'i'));
  big.set_stdin_eof(true);
  relay_.Input(id, big);
  std::vector<v1::ExecInput> pieces = backend_.Inputs();
  ASSERT_EQ(pieces.size(), 11u) << "pieces of a quarter of the 100-byte input window";
  int64_t total = 0;
  for (const v1::ExecInput& in : pieces) {
    EXPECT_LE(in.data().size(), 25u);
    total += static_cast<int64_t>(in.data().size());
  }
  EXPECT_EQ(total, 260);
  EXPECT_TRUE(pieces.back().eof());
  EXPECT_FALSE(pieces.front().eof());

  v1::ExecOutput flood = Out(id);
  flood.set_data(std::string(2001, 'x'));  // more than twice the 1000-byte window, nothing written
  relay_.OnExecOutput("n1", flood);
  absl::Status status;
  Drain(id, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("more output than the window allows"));
  EXPECT_TRUE(backend_.Inputs().back().close()) << "its command is hung up on";
}

TEST_F(ExecRelayTest, OutputIsAcknowledgedAsItIsWrittenAndInputIsHeldBackUntilTaken) {
  auto sink = std::make_shared<FakeSink>();
  uint64_t id = *relay_.Open(Start(), sink, "alice");
  for (int i = 0; i < 4; ++i) {
    v1::ExecOutput data = Out(id);
    data.set_data(std::string(100, 'x'));
    relay_.OnExecOutput("n1", data);
  }
  EXPECT_TRUE(backend_.Inputs().empty()) << "nothing written yet, nothing acknowledged";
  Drain(id);
  std::vector<v1::ExecInput> acks = backend_.Inputs();
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back().acked(), 400) << "all that was written";

  // Input: up to the input window on its way, then the stream waits.
  EXPECT_TRUE(relay_.CanRead(id));
  v1::ExecRequest in;
  in.set_stdin(std::string(100, 'i'));
  relay_.Input(id, in);
  EXPECT_EQ(backend_.Inputs().back().data().size(), 25u) << "the last of four pieces";
  EXPECT_FALSE(relay_.CanRead(id));
  int ready = sink->ready;
  v1::ExecOutput taken = Out(id);
  taken.set_input_taken(60);
  relay_.OnExecOutput("n1", taken);
  EXPECT_EQ(sink->ready, ready + 1) << "the stream may read again";
  EXPECT_TRUE(relay_.CanRead(id));
  v1::ExecRequest resize;
  resize.set_rows(50);
  resize.set_cols(120);
  relay_.Input(id, resize);
  EXPECT_EQ(backend_.Inputs().back().rows(), 50);
  EXPECT_EQ(backend_.Inputs().back().cols(), 120);

  // The client goes: the command is hung up on.
  relay_.Close(id);
  EXPECT_TRUE(backend_.Inputs().back().close());
}

TEST_F(ExecRelayTest, TasksNotRunningAndBadOrdersAreRefusedNamingTheReason) {
  auto sink = std::make_shared<FakeSink>();
  EXPECT_EQ(relay_.Open(Start("init"), sink, "alice").status().code(), absl::StatusCode::kFailedPrecondition);
  absl::Status missing = relay_.Open(Start("ps"), sink, "alice").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("job train has no task ps/0"));
  v1::ExecStart other = Start();
  other.set_job("nosuch");
  EXPECT_EQ(relay_.Open(other, sink, "alice").status().code(), absl::StatusCode::kNotFound);
  v1::ExecStart empty = Start();
  empty.clear_command();
  EXPECT_THAT(relay_.Open(empty, sink, "alice").status().message(), HasSubstr("command: must be given"));
  v1::ExecStart huge = Start();
  huge.add_command(std::string(ExecRelay::kMaxCommandBytes, 'a'));
  EXPECT_THAT(relay_.Open(huge, sink, "alice").status().message(), HasSubstr("bytes of arguments"));
  backend_.connected.erase("n2");
  absl::Status away = relay_.Open(Start("worker", 1), sink, "alice").status();
  EXPECT_EQ(away.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(away.message(), HasSubstr("node n2"));
  EXPECT_EQ(relay_.Stats().open, 0) << "nothing is left open by a refusal";
}

TEST_F(ExecRelayTest, SessionsAreBoundedPerUserAndInAll) {
  auto sink = std::make_shared<FakeSink>();
  ASSERT_TRUE(relay_.Open(Start(), sink, "alice").ok());
  ASSERT_TRUE(relay_.Open(Start(), sink, "alice").ok());
  absl::Status third = relay_.Open(Start(), sink, "alice").status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.message(), HasSubstr("user alice has 2 exec sessions open"));
  ASSERT_TRUE(relay_.Open(Start(), sink, "bob").ok());
  absl::Status full = relay_.Open(Start(), sink, "carol").status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("3 exec sessions already"));
  EXPECT_EQ(relay_.Stats().refused, 2);
}

TEST_F(ExecRelayTest, ANodeThatLeavesEndsItsSessionsUnavailable) {
  auto sink = std::make_shared<FakeSink>();
  uint64_t on_n1 = *relay_.Open(Start(), sink, "alice");
  uint64_t on_n2 = *relay_.Open(Start("worker", 1), sink, "bob");
  relay_.OnNodeDisconnected("n1");
  absl::Status status;
  Drain(on_n1, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("node n1 of job train task worker/0 left the server"));
  EXPECT_EQ(relay_.Next(on_n2).kind, ExecNext::Kind::kNothing) << "the other node's goes on";
  // Should the node have a new stream already, the session is hung up on there.
  ASSERT_TRUE(backend_.Inputs().back().close());
  EXPECT_EQ(backend_.Inputs().back().request_id(), on_n1);
  size_t before = backend_.sent.size();
  relay_.Close(on_n1);
  EXPECT_EQ(backend_.sent.size(), before) << "its session was ended already";
}

}  // namespace
}  // namespace trainyard::server
