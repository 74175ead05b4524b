// A stranger against a real cluster (docs/security.md): another uid of the
// host (uid 65534 through setpriv, where it can run the binary) holding a
// token of its own, and a caller with no token or a made-up one. It submits
// as another user, submits production work, kills, reads the logs of and
// reports a verdict for another user's job, cordons a node and mints a
// token, over the CLI, gRPC and REST. Each is refused with a message that
// names what was refused, and the victim's job is still RUNNING with no
// restart; its owner can still read its logs and kill it.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "security/server_security.h"
#include "security/tokens.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kVictimSpec[] = R"(
name: victim
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi, gpus: 2}
    command: [sh, -c, 'echo "secret=hunter2"; exec sleep 600']
)";

class Stranger {
 public:
  Stranger(Cluster* c, std::string token) : c_(c), token_(std::move(token)) {
    // Another uid when setpriv can run the binary as it; else this uid with
    // the stranger's token (what is checked is the token either way).
    CommandResult probe = RunCommandLine(Prefix({"--version"}), absl::Seconds(20));
    other_uid_ = probe.exit_code == 0;
  }
  // `trainyard ARGS --server ADDRESS` as the stranger.
  CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--server", c_->address()});
    return RunCommandLine(Prefix(args), absl::Seconds(30), {"TRAINYARD_TOKEN=" + token_, "TRAINYARD_CONFIG"});
  }
  bool other_uid() const { return other_uid_; }

 private:
  std::vector<std::string> Prefix(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid", absl::StrCat(kNobody), "--regid",
                                     absl::StrCat(kNobody), "--clear-groups", TrainyardBin()};
    if (getuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) argv = {TrainyardBin()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  Cluster* c_;
  std::string token_;
  bool other_uid_ = false;
};

std::unique_ptr<v1::Trainyard::Stub> UsersSecurityStub(const Cluster& c) {
  return v1::Trainyard::NewStub(grpc::CreateChannel(c.address(), ClientCredentials()));
}

// ReportJobOutcome(FAILED) for `job` with `metadata` (key, value pairs).
grpc::Status ReportFailed(const Cluster& c, const std::string& job,
                          const std::vector<std::pair<std::string, std::string>>& metadata) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  v1::JobOutcomeRequest req;
  req.set_job(job);
  req.set_state(v1::JOB_FAILED);
  req.set_reason("made up by a stranger");
  v1::JobOutcomeResponse resp;
  return UsersSecurityStub(c)->ReportJobOutcome(&ctx, req, &resp);
}

TEST(UsersSecurityTest, AStrangerIsRefusedEverythingOfAnotherUsersJob) {
  Cluster c;
  std::string alice = c.UserToken("alice");
  std::string mallory = c.UserToken("mallory");
  ASSERT_FALSE(alice.empty());
  ASSERT_FALSE(mallory.empty());
  WriteFile(c.dir() + "/victim.yaml", kVictimSpec);
  CommandResult submitted = c.CliAs(alice, {"submit", c.dir() + "/victim.yaml"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  ASSERT_TRUE(c.WaitForState("victim", "RUNNING"));
  EXPECT_EQ(c.Describe("victim").value("user", ""), "alice") << "the job is its submitter's";

  Stranger s(&c, mallory);
  std::cout << "the stranger runs as " << (s.other_uid() ? "uid 65534" : "this uid") << "\n";
  // The stranger's spec files are readable by any uid.
  WriteFile(c.dir() + "/as-alice.yaml", absl::StrCat(kVictimSpec, "user: alice\n"));
  WriteFile(c.dir() + "/production.yaml", "name: rush\npriority: production\n" + std::string(kVictimSpec).substr(14));
  chmod(c.dir().c_str(), 0755);

  CommandResult as_alice = s.Cli({"submit", c.dir() + "/as-alice.yaml"});
  EXPECT_EQ(as_alice.exit_code, 1);
  EXPECT_THAT(as_alice.err, HasSubstr("user: the spec says 'alice' but you are 'mallory'"));
  CommandResult production = s.Cli({"submit", c.dir() + "/production.yaml"});
  EXPECT_EQ(production.exit_code, 1);
  EXPECT_THAT(production.err, HasSubstr("priority: 'mallory' may not submit production work to queue 'default'"));
  CommandResult kill = s.Cli({"kill", "victim"});
  EXPECT_EQ(kill.exit_code, 1);
  EXPECT_THAT(kill.err, HasSubstr("you ('mallory') may not kill job victim: it belongs to 'alice'"));
  CommandResult logs = s.Cli({"logs", "victim"});
  EXPECT_EQ(logs.exit_code, 1);
  EXPECT_THAT(logs.err, HasSubstr("may not read the logs of job victim"));
  EXPECT_THAT(logs.out, Not(HasSubstr("hunter2")));
  CommandResult cordon = s.Cli({"cordon", "node-0"});
  EXPECT_EQ(cordon.exit_code, 1);
  EXPECT_THAT(cordon.err, HasSubstr("only a cluster admin may"));
  CommandResult mint = s.Cli({"token", "create", "mallory", "--admin"});
  EXPECT_EQ(mint.exit_code, 1);
  EXPECT_THAT(mint.err, HasSubstr("may not create tokens: only a cluster admin may"));
  CommandResult guessed = RunCli({"jobs", "--server", c.address()}, absl::Seconds(30),
                                 {"TRAINYARD_TOKEN=ty_0123", "TRAINYARD_CONFIG"});
  EXPECT_EQ(guessed.exit_code, 1);
  EXPECT_THAT(guessed.err, HasSubstr("the token is not valid on this server"));
  CommandResult none = RunCli({"jobs", "--server", c.address()}, absl::Seconds(30), {"TRAINYARD_TOKEN", "TRAINYARD_CONFIG"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("this server requires a token and none was sent"));

  // The verdict: only the job's own master (its credential) may give it.
  grpc::Status no_token = ReportFailed(c, "victim", {});
  EXPECT_EQ(no_token.error_code(), grpc::StatusCode::UNAUTHENTICATED) << no_token.error_message();
  grpc::Status as_mallory = ReportFailed(c, "victim", {{"authorization", "Bearer " + mallory}});
  EXPECT_EQ(as_mallory.error_code(), grpc::StatusCode::PERMISSION_DENIED) << as_mallory.error_message();
  grpc::Status forged = ReportFailed(c, "victim", {{"trainyard-job-token", std::string(64, 'a')}});
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(forged.error_message(), HasSubstr("only its own master may report its outcome"));

  // REST: the same refusals, as JSON.
  httplib::Client http = HttpClient(c.http_address());
  http.set_default_headers({{"Authorization", "Bearer " + mallory}});
  HttpResult rest_kill = ToResult(http.Post("/api/v1/jobs/victim/kill", "", "application/json"));
  EXPECT_EQ(rest_kill.status, 403) << rest_kill.body;
  EXPECT_EQ(rest_kill.json["error"]["status"], "PERMISSION_DENIED") << rest_kill.body;
  HttpResult rest_logs = ToResult(http.Get("/api/v1/jobs/victim/tasks/victim-worker-0/logs"));
  EXPECT_EQ(rest_logs.status, 403) << rest_logs.body;
  EXPECT_EQ(ToResult(http.Get("/api/v1/jobs/victim/logs.tar.gz")).status, 403);
  httplib::Client anonymous("http://" + c.http_address());
  HttpResult no_token_watch = ToResult(anonymous.Get("/api/v1/watch?topics=jobs"));
  EXPECT_EQ(no_token_watch.status, 401);
  EXPECT_THAT(no_token_watch.json["error"]["message"].get<std::string>(), HasSubstr("requires a token"));
  EXPECT_EQ(ToResult(anonymous.Get("/healthz")).status, 200) << "health stays public";

  // The job's credential (what its master reports with) is in no view, log
  // or store file of the server.
  nlohmann::json view = c.Describe("victim");
  std::string secret(absl::StripAsciiWhitespace(ReadFile(c.server_data_dir() + "/job-secret")));
  ASSERT_FALSE(secret.empty());
  std::string credential = security::JobCredential(secret, view.value("id", uint64_t{0}));
  EXPECT_THAT(view.dump(), Not(HasSubstr(credential)));
  EXPECT_THAT(c.Cli({"jobs", "-o", "json"}).out, Not(HasSubstr(credential)));
  EXPECT_THAT(ToResult(HttpClient(c.http_address()).Get("/api/v1/jobs/victim")).body, Not(HasSubstr(credential)));
  for (const char* file : {"/server.log"}) EXPECT_THAT(ReadFile(c.dir() + file), Not(HasSubstr(credential)));
  for (const char* file : {"/state.db", "/state.db-wal"}) {
    EXPECT_THAT(ReadFile(c.server_data_dir() + file), Not(HasSubstr(credential))) << file;
  }

  // Nothing of the victim's changed: RUNNING, no restart; its owner reads its
  // logs and kills it.
  nlohmann::json victim = c.Describe("victim");
  EXPECT_EQ(victim.value("state", ""), "RUNNING") << victim.dump();
  for (const auto& t : victim["tasks"]) EXPECT_EQ(t.value("restarts", 0), 0) << t.dump();
  CommandResult own_logs = c.CliAs(alice, {"logs", "victim"});
  EXPECT_EQ(own_logs.exit_code, 0) << own_logs.err;
  EXPECT_THAT(own_logs.out, HasSubstr("secret=hunter2"));
  CommandResult own_kill = c.CliAs(alice, {"kill", "victim"});
  EXPECT_EQ(own_kill.exit_code, 0) << own_kill.err;
  EXPECT_TRUE(c.WaitForState("victim", "KILLED"));
}

TEST(UsersSecurityTest, QueueAclsDecideWhoSubmitsAndWhoAdministers) {
  TempDir dir;
  WriteFile(dir.path() + "/queues.yaml", R"(queues:
  - name: prod
    capacity: 50
    aclSubmitJobs: [alice]
    aclAdministerJobs: [carol]
    aclProduction: [alice]
  - name: research
    capacity: 50
)");
  ClusterOptions o;
  o.server_flags = {"--queue-config", dir.path() + "/queues.yaml", "--queue-policy", "capacity"};
  Cluster c(o);
  std::string alice = c.UserToken("alice"), bob = c.UserToken("bob"), carol = c.UserToken("carol");
  WriteFile(c.dir() + "/prod.yaml", "queue: prod\npriority: production\n" + std::string(kVictimSpec));
  CommandResult by_bob = c.CliAs(bob, {"submit", c.dir() + "/prod.yaml"});
  EXPECT_EQ(by_bob.exit_code, 1);
  EXPECT_THAT(by_bob.err, HasSubstr("queue: 'bob' may not submit to queue 'prod' (its aclSubmitJobs)"));
  CommandResult by_alice = c.CliAs(alice, {"submit", c.dir() + "/prod.yaml"});
  ASSERT_EQ(by_alice.exit_code, 0) << by_alice.err;
  ASSERT_TRUE(c.WaitForState("victim", "RUNNING"));
  EXPECT_EQ(c.CliAs(bob, {"kill", "victim"}).exit_code, 1);
  // Carol administers prod: she may kill alice's job, not make up its end.
  grpc::Status made_up = ReportFailed(c, "victim", {{"authorization", "Bearer " + carol}});
  EXPECT_EQ(made_up.error_code(), grpc::StatusCode::PERMISSION_DENIED) << made_up.error_message();
  EXPECT_THAT(made_up.error_message(), HasSubstr("only its master, its owner or a cluster admin"));
  EXPECT_EQ(c.Describe("victim")["state"], "RUNNING");
  CommandResult by_carol = c.CliAs(carol, {"kill", "victim"});
  EXPECT_EQ(by_carol.exit_code, 0) << "carol administers prod: " << by_carol.err;
  EXPECT_TRUE(c.WaitForState("victim", "KILLED"));
}

TEST(UsersSecurityTest, AUserAtMaxPendingJobsIsRefusedAndAnotherUserIsNot) {
  ClusterOptions o;
  o.nodes = 1;
  o.server_flags = {"--max-pending-jobs-per-user", "2"};
  Cluster c(o);
  std::string mallory = c.UserToken("mallory"), alice = c.UserToken("alice");
  // More GPUs than the cluster has: every job waits.
  WriteFile(c.dir() + "/wait.yaml", R"(name: wait
replicas:
  worker:
    count: 2
    resources: {gpus: 8, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  for (int i = 0; i < 2; ++i) {
    CommandResult r = c.CliAs(mallory, {"submit", c.dir() + "/wait.yaml"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  CommandResult third = c.CliAs(mallory, {"submit", c.dir() + "/wait.yaml"});
  EXPECT_NE(third.exit_code, 0);
  EXPECT_THAT(third.err, HasSubstr("user mallory has 2 jobs waiting to start, the most this server takes per user "
                                   "(maxPendingJobsPerUser 2)"));
  CommandResult by_alice = c.CliAs(alice, {"submit", c.dir() + "/wait.yaml"});
  EXPECT_EQ(by_alice.exit_code, 0) << by_alice.err;
  CommandResult jobs = c.Cli({"jobs", "-o", "json"});
  EXPECT_EQ(nlohmann::json::parse(jobs.out, nullptr, false).value("jobs", nlohmann::json::array()).size(), 3u)
      << jobs.out;
}

// An IPv4 address of this host that is not loopback; "" when it has none.
std::string NonLoopbackAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* a = all; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    if (!absl::StartsWith(text, "127.")) found = text;
  }
  freeifaddrs(all);
  return found;
}

TEST(UsersSecurityTest, TheCliNeverSendsItsTokenInClearToAnotherHost) {
  std::string host = NonLoopbackAddress();
  if (host.empty()) GTEST_SKIP() << "this host has no address but loopback";
  // Nothing listens there (a free port): the call fails either way; what
  // matters is that the token did not go.
  std::string address = absl::StrCat(host, ":", FreePort());
  CommandResult r = RunCli({"jobs", "--server", address}, absl::Seconds(30),
                           {"TRAINYARD_TOKEN=ty_not_for_the_network", "TRAINYARD_CA_FILE", "TRAINYARD_CONFIG"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("not sending the token in clear to " + address));
}

// A token taken out of the server's token file ends the streams it opened:
// a `logs -f` over gRPC and a followed log over REST get nothing more of
// the log once the server has looked at it again (every 5 s), and say why.
TEST(UsersSecurityTest, ARevokedTokensOpenLogStreamsEnd) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string bob = c.UserToken("bob");
  ASSERT_FALSE(bob.empty());
  std::string spec = c.dir() + "/ticking.yaml";
  WriteFile(spec, R"(name: ticking
user: bob
replicas:
  worker:
    count: 1
    command: [sh, -c, 'while true; do echo tick; sleep 0.1; done']
)");
  CommandResult sub = c.CliAs(bob, {"submit", spec});
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  ASSERT_TRUE(c.WaitForState("ticking", "RUNNING"));

  // gRPC: `trainyard logs -f` with bob's token.
  std::string grpc_out = c.dir() + "/logs-f.out";
  Process follow({"/usr/bin/env", "TRAINYARD_TOKEN=" + bob, "TRAINYARD_CONFIG=", TrainyardBin(), "logs", "ticking",
                  "-f", "--server", c.address()},
                 grpc_out);
  // REST: the followed log of the same task, read on a thread.
  std::string rest_text;
  std::mutex rest_mu;
  std::atomic<bool> rest_done{false}, rest_stop{false};
  std::thread rest([&] {
    httplib::Client client("http://" + c.http_address());
    client.set_default_headers({{"Authorization", "Bearer " + bob}});
    client.set_read_timeout(60, 0);
    client.Get("/api/v1/jobs/ticking/tasks/ticking-worker-0/logs?follow=1", [&](const char* d, size_t n) {
      std::lock_guard<std::mutex> lock(rest_mu);
      rest_text.append(d, n);
      return !rest_stop.load();
    });
    rest_done = true;
  });
  auto rest_has = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(rest_mu);
    return rest_text.find(what) != std::string::npos;
  };
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(grpc_out).find("tick") != std::string::npos && rest_has("tick"); },
                      absl::Seconds(20)))
      << ReadFile(grpc_out);

  // Revoke: the token file without bob's line (a new file put in place).
  std::string tokens = security::TokenFilePath(c.server_data_dir());
  std::string kept;
  for (absl::string_view line : absl::StrSplit(ReadFile(tokens), '\n', absl::SkipEmpty())) {
    if (!absl::StrContains(line, " bob ")) absl::StrAppend(&kept, line, "\n");
  }
  WriteFile(tokens + ".new", kept);
  ASSERT_EQ(chmod((tokens + ".new").c_str(), 0600), 0);
  ASSERT_EQ(rename((tokens + ".new").c_str(), tokens.c_str()), 0);
  httplib::Client as_bob("http://" + c.http_address());
  as_bob.set_default_headers({{"Authorization", "Bearer " + bob}});
  auto refused = as_bob.Get("/api/v1/jobs");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);

  EXPECT_TRUE(WaitUntil([&] { return !follow.Running(); }, absl::Seconds(20))) << ReadFile(grpc_out);
  EXPECT_THAT(ReadFile(grpc_out), HasSubstr("no longer valid"));
  EXPECT_TRUE(WaitUntil([&] { return rest_done.load(); }, absl::Seconds(20)));
  rest_stop = true;  // a stream that did not end is cut here (at its next piece)
  rest.join();
  EXPECT_TRUE(rest_has("[trainyard] the token this stream began with is no longer valid")) << rest_text.substr(0, 2000);
  // The job itself goes on.
  EXPECT_EQ(c.Describe("ticking")["state"], "RUNNING");
}

}  // namespace
}  // namespace trainyard::testing
