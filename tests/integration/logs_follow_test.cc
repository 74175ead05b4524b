// `trainyard logs -f` end to end: a real server and agent, tasks that write
// when the test lets them (they wait for files the test creates), the CLI
// and raw gRPC streams as readers.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/log_lines.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// Threads: of /proc/PID/status.
int ThreadsOf(pid_t pid) {
  std::string status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    int n;
    if (absl::ConsumePrefix(&line, "Threads:") && absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &n)) return n;
  }
  return -1;
}

// A raw stream's data without the 20-byte time stamp that begins each line
// (the stream carries the log as the node keeps it; src/api/log_lines.h).
std::string Unstamped(const std::string& data) {
  std::string text;
  for (absl::string_view line : absl::StrSplit(data, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&text, line.substr(std::min<size_t>(line.size(), 20)), "\n");
  }
  return text;
}

// `trainyard logs ARGS... --server ADDRESS` running in the background, its
// output in a file.
std::unique_ptr<Process> Follow(Cluster& c, const std::vector<std::string>& args, const std::string& out) {
  std::vector<std::string> argv = {TrainyardBin(), "logs"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--server", c.address()});
  return std::make_unique<Process>(argv, out);
}

TEST(LogsFollowTest, FollowSeesEachLineAsItIsWrittenAndEndsWithTheJob) {
  Cluster c({.nodes = 1});
  std::string go1 = c.dir() + "/go1", go2 = c.dir() + "/go2";
  std::string job = c.Submit(absl::StrCat(R"(
name: tail
replicas:
  worker:
    command: [sh, -c, 'echo first; )", WaitForFile(go1), R"(; echo second; )", WaitForFile(go2), R"(; echo third']
)"));
  std::string out = c.dir() + "/follow.out";
  std::unique_ptr<Process> follow = Follow(c, {job, "worker/0", "-f"}, out);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("first\n") != std::string::npos; }, absl::Seconds(30)))
      << ReadFile(out);
  EXPECT_EQ(ReadFile(out).find("second"), std::string::npos);
  WriteFile(go1, "");
  absl::Time written = absl::Now();
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("second\n") != std::string::npos; }, absl::Seconds(10)))
      << ReadFile(out);
  std::cerr << "second line seen " << absl::FormatDuration(absl::Now() - written) << " after its task could write it\n";
  EXPECT_TRUE(follow->Running());  // the task still runs: -f waits for more
  WriteFile(go2, "");
  ASSERT_TRUE(WaitUntil([&] { return !follow->Running(); }, absl::Seconds(30))) << ReadFile(out);
  EXPECT_EQ(ReadFile(out), "first\nsecond\nthird\n");
  EXPECT_EQ(c.JobState(job), "SUCCEEDED");
}

TEST(LogsFollowTest, FollowShowsEveryAttemptOfARestartedTaskAndEndsWithTheJob) {
  Cluster c({.nodes = 1});
  std::string counter = c.dir() + "/count", go = c.dir() + "/go";
  std::string job = c.Submit(absl::StrCat(R"(
name: flaky
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 2
    command: [sh, -c, 'n=$(cat )", counter, R"( 2>/dev/null || echo 0); n=$((n+1)); echo $n > )", counter,
                                          R"(; echo "run $n"; if [ $n -eq 1 ]; then )", WaitForFile(go),
                                          R"(; echo "run 1 fails" >&2; exit 3; fi; echo "run $n done"']
)"));
  std::string out = c.dir() + "/follow.out";
  std::unique_ptr<Process> follow = Follow(c, {job, "worker/0", "-f"}, out);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("run 1\n") != std::string::npos; }, absl::Seconds(30)))
      << ReadFile(out);
  WriteFile(go, "");
  ASSERT_TRUE(WaitUntil([&] { return !follow->Running(); }, absl::Seconds(60))) << ReadFile(out);
  std::string text = ReadFile(out);
  EXPECT_THAT(text, HasSubstr("run 1\n"));
  EXPECT_THAT(text, HasSubstr("run 1 fails\n"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("==> ", job, "-worker-0 (attempt 1) <==\nrun 2\n")));
  EXPECT_THAT(text, HasSubstr("run 2 done\n"));
  EXPECT_LT(text.find("run 1\n"), text.find("run 2\n"));
  EXPECT_EQ(c.JobState(job), "SUCCEEDED");
}

TEST(LogsFollowTest, FollowGoesOnWhenTheTaskIsStartedOnAnotherNode) {
  Cluster c({.nodes = 2, .node_timeout_ms = 1500});
  std::string pids = c.dir() + "/pids", go = c.dir() + "/go";
  ASSERT_EQ(mkdir(pids.c_str(), 0755), 0);
  std::string job = c.Submit(absl::StrCat(R"(
name: mover
nodeName: node-0
relaxLocality: true
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 3
    command: [sh, -c, 'echo $$ > )", pids, R"(/$TRAINYARD_NODE; echo "on $TRAINYARD_NODE"; )", WaitForFile(go),
                                          R"(; echo "done on $TRAINYARD_NODE"']
)"));
  std::string out = c.dir() + "/follow.out";
  std::unique_ptr<Process> follow = Follow(c, {job, "worker/0", "-f"}, out);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("on node-0\n") != std::string::npos; }, absl::Seconds(30)))
      << ReadFile(out);
  c.agent(0).Kill();  // the node is lost; its task, an orphan now, is stopped below
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("on node-1\n") != std::string::npos; }, absl::Seconds(30)))
      << ReadFile(out);
  WriteFile(go, "");
  ASSERT_TRUE(WaitUntil([&] { return !follow->Running(); }, absl::Seconds(30))) << ReadFile(out);
  std::string text = ReadFile(out);
  EXPECT_THAT(text, HasSubstr(absl::StrCat("==> ", job, "-worker-0 (attempt 1) <==\non node-1\n")));
  EXPECT_THAT(text, HasSubstr("attempt 0 of " + job + "-worker-0 ran on node-0, which is LOST"));
  EXPECT_THAT(text, HasSubstr("done on node-1\n"));
  EXPECT_EQ(c.JobState(job), "SUCCEEDED");
  int orphan = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pids + "/node-0")), &orphan) && orphan > 1) {
    kill(orphan, SIGKILL);
  }
}

// A followed log that the server itself ends (the task's node is LOST and
// the job has ended, so nothing more can come) ends the CLI with the
// server's reason: the stream carries the server's trailer, so the CLI
// does not take it for a server gone in a failover and open it again.
TEST(LogsFollowTest, AFollowedLogTheServerEndsForALostNodeIsNotOpenedAgain) {
  Cluster c({.nodes = 1, .node_timeout_ms = 1500});
  std::string job = c.Submit(R"(
name: stranded
replicas:
  worker:
    command: [sh, -c, 'i=0; while true; do i=$((i+1)); echo "line-$i"; sleep 0.1; done']
)");
  std::string out = c.dir() + "/follow.out";
  std::unique_ptr<Process> follow = Follow(c, {job, "worker/0", "-f"}, out);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("line-5\n") != std::string::npos; }, absl::Seconds(30)))
      << ReadFile(out);
  // The agent frozen: its node is LOST, the job goes back to the queue
  // with no node to take it, and then it is killed.
  pid_t agent = c.agent(0).pid();
  ASSERT_EQ(kill(agent, SIGSTOP), 0);
  bool lost = WaitUntil([&] { return c.Cli({"nodes"}).out.find("LOST") != std::string::npos; }, absl::Seconds(60));
  CommandResult killed = c.Cli({"kill", job});
  bool ended = WaitUntil([&] { return !follow->Running(); }, absl::Seconds(60));
  kill(agent, SIGCONT);
  ASSERT_TRUE(lost) << c.Cli({"nodes"}).out;
  ASSERT_EQ(killed.exit_code, 0) << killed.err;
  ASSERT_TRUE(ended) << ReadFile(out);
  std::string text = ReadFile(out);
  EXPECT_NE(follow->exit_status(), 0) << text;
  EXPECT_THAT(text, HasSubstr("attempt 0 of " + job + "-worker-0 ran on node-0, which is LOST"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("following on"))) << "the CLI opened a stream the server ended again";
}

TEST(LogsFollowTest, ManyFollowersHoldNoThreadEachAndOnePastTheLimitIsRefused) {
  constexpr int kFollowers = 200;
  TempDir conf;
  std::string config = conf.path() + "/server.yaml";
  // All of them the admin's: the per-user limits as high as the total.
  WriteFile(config, absl::StrCat("maxLogFollowers: ", kFollowers, "\nlogStreams: {perUser: ", kFollowers,
                                 ", perUserPerNode: ", 2 * kFollowers, "}\n"));
  Cluster c({.nodes = 1, .server_flags = {"--config", config}});
  std::string go = c.dir() + "/go";
  std::string job = c.Submit(absl::StrCat(R"(
name: watched
replicas:
  worker:
    command: [sh, -c, 'echo ready; )", WaitForFile(go), R"(; echo done']
)"));
  ASSERT_TRUE(WaitUntil([&] { return c.Cli({"logs", job, "worker/0"}).out == "ready\n"; }, absl::Seconds(30)));
  int before = ThreadsOf(c.server().pid());

  auto channel = grpc::CreateChannel(c.address(), ClientCredentials());
  auto stub = v1::Trainyard::NewStub(channel);
  v1::LogsRequest req;
  req.set_job(job);
  req.set_role("worker");
  req.set_index(0);
  req.set_attempt(-1);
  req.set_follow(true);
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader;
    std::string data;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kFollowers; ++i) {
    streams.push_back(std::make_unique<Stream>());
    streams.back()->ctx.AddMetadata("authorization", AdminAuthorization());
    streams.back()->reader = stub->Logs(&streams.back()->ctx, req);
  }
  // Each stream is served: it has the task's first line.
  for (auto& s : streams) {
    v1::LogChunk chunk;
    while (s->data.find("ready\n") == std::string::npos && s->reader->Read(&chunk)) s->data += chunk.data();
    ASSERT_EQ(Unstamped(s->data), "ready\n") << s->data;
  }
  int during = ThreadsOf(c.server().pid());
  std::cerr << "server threads: " << before << " before, " << during << " with " << kFollowers << " followers\n";
  EXPECT_LT(during - before, kFollowers / 4);

  grpc::ClientContext extra_ctx;
  extra_ctx.AddMetadata("authorization", AdminAuthorization());
  auto extra = stub->Logs(&extra_ctx, req);
  v1::LogChunk chunk;
  EXPECT_FALSE(extra->Read(&chunk));
  grpc::Status refused = extra->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("200 log streams, its limit (maxLogFollowers)"));
  // A stream the server ends itself says so (a follower opens again only
  // one that ended without it: its server gone).
  EXPECT_EQ(extra_ctx.GetServerTrailingMetadata().count(api::kLogsEndedByServerKey), 1u);

  // All of them see the rest and end with the job.
  WriteFile(go, "");
  for (auto& s : streams) {
    while (s->reader->Read(&chunk)) s->data += chunk.data();
    grpc::Status st = s->reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(Unstamped(s->data), "ready\ndone\n");
    EXPECT_EQ(s->ctx.GetServerTrailingMetadata().count(api::kLogsEndedByServerKey), 1u);
  }
}

// One user's follows stop at their cap (RESOURCE_EXHAUSTED over gRPC, 429
// over REST, naming it) while another user's `logs` and `logs -f` are still
// served; the refusals are counted in /metrics.
TEST(LogsFollowTest, OneUserAtTheFollowCapDoesNotStopAnothersLogs) {
  constexpr int kCap = 3;
  TempDir conf;
  std::string config = conf.path() + "/server.yaml";
  WriteFile(config, absl::StrCat("logStreams: {perUser: ", kCap, "}\n"));
  Cluster c({.nodes = 1, .server_flags = {"--config", config}});
  std::string mallory = c.UserToken("mallory");
  std::string ana = c.UserToken("ana");
  ASSERT_FALSE(mallory.empty());
  ASSERT_FALSE(ana.empty());
  std::string go = c.dir() + "/go";
  for (const std::string& user : {std::string("mallory"), std::string("ana")}) {
    WriteFile(c.dir() + "/" + user + ".yaml", absl::StrCat("name: ", user, "-job\nreplicas:\n  worker:\n"
                                                           "    command: [sh, -c, 'echo ready; ", WaitForFile(go),
                                                           "; echo done']\n"));
    CommandResult submitted = c.CliAs(user == "ana" ? ana : mallory, {"submit", c.dir() + "/" + user + ".yaml"});
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  }
  ASSERT_TRUE(WaitUntil([&] { return c.CliAs(mallory, {"logs", "mallory-job", "worker/0"}).out == "ready\n"; },
                      absl::Seconds(30)));
  ASSERT_TRUE(WaitUntil([&] { return c.CliAs(ana, {"logs", "ana-job", "worker/0"}).out == "ready\n"; },
                      absl::Seconds(30)));

  auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(c.address(), ClientCredentials()));
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader;
    std::string data;
  };
  auto open = [&](const std::string& token, const std::string& job) {
    auto s = std::make_unique<Stream>();
    s->ctx.AddMetadata("authorization", "Bearer " + token);
    v1::LogsRequest req;
    req.set_job(job);
    req.set_role("worker");
    req.set_index(0);
    req.set_attempt(-1);
    req.set_follow(true);
    s->reader = stub->Logs(&s->ctx, req);
    return s;
  };
  std::vector<std::unique_ptr<Stream>> hers;
  for (int i = 0; i < kCap; ++i) {
    hers.push_back(open(mallory, "mallory-job"));
    v1::LogChunk chunk;
    while (hers.back()->data.find("ready\n") == std::string::npos && hers.back()->reader->Read(&chunk)) {
      hers.back()->data += chunk.data();
    }
    ASSERT_EQ(Unstamped(hers.back()->data), "ready\n");
  }
  std::unique_ptr<Stream> over = open(mallory, "mallory-job");
  v1::LogChunk chunk;
  EXPECT_FALSE(over->reader->Read(&chunk));
  grpc::Status refused = over->reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("the most one user may (logStreams.perUser 3)"));
  HttpResult rest = [&] {
    httplib::Client client("http://" + c.http_address());
    client.set_default_headers({{"Authorization", "Bearer " + mallory}});
    return ToResult(client.Get("/api/v1/jobs/mallory-job/tasks/worker-0/logs?follow=1"));
  }();
  EXPECT_EQ(rest.status, 429) << rest.body;
  EXPECT_THAT(rest.body, HasSubstr("logStreams.perUser 3"));

  // The other user: a plain read, and a follow that sees the task to its end.
  CommandResult read = c.CliAs(ana, {"logs", "ana-job", "worker/0"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "ready\n");
  std::unique_ptr<Stream> theirs = open(ana, "ana-job");
  WriteFile(go, "");
  while (theirs->reader->Read(&chunk)) theirs->data += chunk.data();
  grpc::Status st = theirs->reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(Unstamped(theirs->data), "ready\ndone\n");
  for (auto& s : hers) {
    while (s->reader->Read(&chunk)) s->data += chunk.data();
    EXPECT_TRUE(s->reader->Finish().ok());
  }
  HttpResult metrics = HttpGet(c.http_address(), "/metrics");
  EXPECT_EQ(MetricSample(metrics.body, "trainyard_log_streams_refused_total{reason=\"user_cap\"}"), 2.0);
}

TEST(LogsFollowTest, AReaderThatStopsReadingIsCutOffAndTheServerGoesOn) {
  TempDir conf;
  std::string config = conf.path() + "/server.yaml";
  WriteFile(config, "logFollowerStallMs: 2000\n");
  Cluster c({.nodes = 1, .server_flags = {"--config", config}});
  std::string go = c.dir() + "/go";
  // 20 MB, more than the client's stream window and the sockets hold.
  std::string job = c.Submit(absl::StrCat(R"(
name: chatty
replicas:
  worker:
    command: [sh, -c, 'head -c 20000000 /dev/zero | tr "\\000" x; )", WaitForFile(go), R"(']
)"));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // keep the client's window at its initial size
  auto stub = v1::Trainyard::NewStub(grpc::CreateCustomChannel(c.address(), ClientCredentials(), args));
  v1::LogsRequest req;
  req.set_job(job);
  req.set_role("worker");
  req.set_index(0);
  req.set_attempt(-1);
  req.set_follow(true);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", AdminAuthorization());
  auto reader = stub->Logs(&ctx, req);  // and read nothing
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(c.dir() + "/server.log").find("cut off") != std::string::npos; },
                      absl::Seconds(30)));
  v1::LogChunk chunk;
  int64_t got = 0;
  while (reader->Read(&chunk)) got += static_cast<int64_t>(chunk.data().size());
  grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("log stream cut off"));
  EXPECT_LT(got, 20000000);
  // Others are served as before.
  CommandResult logs = c.Cli({"logs", job, "worker/0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out.size(), 20000000u);
  WriteFile(go, "");
}

}  // namespace
}  // namespace trainyard::testing
