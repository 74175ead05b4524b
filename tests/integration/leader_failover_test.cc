// Servers on one etcd store: one leads, the others wait; when the leader is
// killed (or paused past its lease) a standby takes over with the whole
// state, agents and clients given the list of servers follow it, and running
// tasks keep running. Real etcd, real servers and agents, the CLI.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/wait_until.h"
#include "security/certs.h"
#include "security/tokens.h"
#include "store/etcd_client.h"
#include "tests/etcd/etcd_test_cluster.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

constexpr char kSleeper[] = R"(name: NAME
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi}
    command: [sleep, "600"]
)";

std::string LeaderFailoverSpec(const std::string& name) {
  std::string spec = kSleeper;
  spec.replace(spec.find("NAME"), 4, name);
  return spec;
}

class Servers {
 public:
  // The admin's token is put in the token file of the first `admin_in`
  // servers' data dirs (a server that leads shares its tokens with the
  // next through etcd; where both hold it, the first's file is the one).
  explicit Servers(const std::string& store, int admin_in = 2) : store_(store) {
    for (int i = 0; i < 2; ++i) {
      ports_[i] = FreePortPair();
      http_ports_[i] = FreePort();
      if (i >= admin_in) continue;
      absl::Status added =
          security::AddToken(security::TokenFilePath(data_dir(i)), AdminToken(), "admin", /*admin=*/true);
      EXPECT_TRUE(added.ok()) << added;
    }
  }
  std::string data_dir(int i) const { return absl::StrCat(dir_.path(), "/server-", i); }

  // Starts server i; it leads or waits as a standby. `extra` goes on its
  // command line (e.g. the TLS files of an etcd that asks for them).
  void Start(int i, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{TrainyardBin(), "server", "--listen", absl::StrCat("127.0.0.1:", ports_[i]),
                                  "--data-dir", data_dir(i), "--store", store_, "--leader-lease-ms", "1000",
                                  "--tls-dir", ClusterCertDir(), "--node-timeout-ms", "4000",
                                  "--heartbeat-interval-ms", "200", "--kill-grace-ms", "1000",
                                  "--checkpoint-root", dir_.path() + "/checkpoints", "--http-listen",
                                  absl::StrCat("127.0.0.1:", http_ports_[i]), "--cluster-servers", list()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    servers_[i] = std::make_unique<Process>(argv, log(i));
  }

  // Server 0 leads, server 1 waits; `extra` on both command lines.
  void StartLeaderAndStandby(const std::vector<std::string>& extra = {}) {
    Start(0, extra);
    ASSERT_TRUE(WaitLogSays(0, "listening on")) << ReadFile(log(0));
    Start(1, extra);
    ASSERT_TRUE(WaitLogSays(1, "standby:")) << ReadFile(log(1));
  }

  bool LogSays(int i, const std::string& text) { return ReadFile(log(i)).find(text) != std::string::npos; }
  bool WaitLogSays(int i, const std::string& text, absl::Duration timeout = absl::Seconds(30)) {
    return WaitUntil([&] { return LogSays(i, text); }, timeout, absl::Milliseconds(20));
  }

  // Starts agent `name` with the certificate the harness made for it; or,
  // given `join_flags`, with those (a join token) in place of one.
  void StartAgent(const std::string& name = "node-0", const std::vector<std::string>& join_flags = {}) {
    std::string task_users = dir_.path() + "/task-users";
    WriteFile(task_users, absl::StrCat("\"*\": ", getuid(), "\n"));
    std::vector<std::string> argv{TrainyardBin(), "agent", "--server", list(), "--agent-server",
                                  absl::StrCat("127.0.0.1:", ports_[0] + 1, ",127.0.0.1:", ports_[1] + 1),
                                  "--name", name, "--data-dir", dir_.path() + "/" + name, "--simulate-gpus", "2",
                                  "--memory-mb", "8192", "--vcores", "8", "--address", "127.0.0.1",
                                  "--kill-tasks-on-exit", "--task-user-map", task_users};
    if (getuid() == 0) argv.push_back("--allow-root-tasks");
    std::vector<std::string> tls = join_flags.empty() ? AgentTlsFlags(name) : join_flags;
    argv.insert(argv.end(), tls.begin(), tls.end());
    agents_.push_back(std::make_unique<Process>(argv, dir_.path() + "/" + name + ".log"));
  }

  // Both servers, as a client lists them.
  std::string list() const { return absl::StrCat("127.0.0.1:", ports_[0], ",127.0.0.1:", ports_[1]); }
  std::string address(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }
  std::string agent_address(int i) const { return absl::StrCat("127.0.0.1:", ports_[i] + 1); }

  // `trainyard status -o json`.
  nlohmann::json Status() {
    CommandResult r = Cli({"status", "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--server", list()});
    return RunCli(args);
  }

  std::string Submit(const std::string& name) {
    std::string path = absl::StrCat(dir_.path(), "/", name, ".yaml");
    WriteFile(path, LeaderFailoverSpec(name));
    CommandResult r = Cli({"submit", path});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return name;
  }

  nlohmann::json Describe(const std::string& job) {
    CommandResult r = Cli({"describe", job, "-o", "json"});
    if (r.exit_code != 0) return nlohmann::json::object();
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  bool WaitRunning(const std::string& job) {
    return WaitUntil([&] { return Describe(job).value("state", "") == "RUNNING"; }, absl::Seconds(60),
                     absl::Milliseconds(200));
  }

  // The sample `series` of server i's /metrics; -1 when absent or unanswered.
  double Metric(int i, const std::string& series) {
    return MetricSample(HttpGet(absl::StrCat("127.0.0.1:", http_ports_[i]), "/metrics").body, series).value_or(-1);
  }

  // Server i's GET /api/v1/overview (the dashboard's first page).
  nlohmann::json Overview(int i) {
    return HttpGet(http_address(i), "/api/v1/overview").json;
  }
  std::string http_address(int i) const { return absl::StrCat("127.0.0.1:", http_ports_[i]); }

  Process& server(int i) { return *servers_[i]; }
  std::string log(int i) const { return absl::StrCat(dir_.path(), "/server-", i, ".log"); }
  const std::string& dir() const { return dir_.path(); }

 private:
  std::string store_;
  TempDir dir_;
  int ports_[2] = {0, 0};
  int http_ports_[2] = {0, 0};
  std::unique_ptr<Process> servers_[2];
  std::vector<std::unique_ptr<Process>> agents_;
};

// What a standby's HTTP address answers while `leader` leads.
void ExpectStandbySendsTo(Servers& servers, int standby, int leader) {
  const std::string leader_url = "http://" + servers.http_address(leader);
  httplib::Client client("http://" + servers.http_address(standby));
  client.set_read_timeout(30, 0);
  // The leader publishes its URL once it serves HTTP; the standby reads it
  // within a poll.
  std::string body = "no answer", location;
  ASSERT_TRUE(WaitUntil([&] {
    httplib::Result r = client.Get("/api/v1/overview?x=1");
    if (!r) return false;
    body = r->body;
    location = r->get_header_value("Location");
    return r->status == 307;
  }, absl::Seconds(30))) << body << ReadFile(servers.log(standby));
  EXPECT_EQ(location, leader_url + "/api/v1/overview?x=1");
  EXPECT_TRUE(servers.LogSays(standby, "the leader's HTTP API is at " + leader_url)) << ReadFile(servers.log(standby));
  // A browser opening the dashboard there is shown the leader's.
  httplib::Client browser("http://" + servers.http_address(standby));
  browser.set_follow_location(true);
  httplib::Result page = browser.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type").rfind("text/html", 0), 0u) << page->get_header_value("Content-Type");
  EXPECT_EQ(page->location, leader_url + "/");
  // Only the leader is ready; each says in /metrics whether it leads.
  EXPECT_EQ(HttpGet(servers.http_address(standby), "/readyz").status, 503);
  EXPECT_EQ(HttpGet(servers.http_address(leader), "/readyz").status, 200);
  EXPECT_EQ(HttpGet(servers.http_address(standby), "/healthz").status, 200);
  EXPECT_EQ(servers.Metric(leader, "trainyard_server_is_leader"), 1);
  EXPECT_EQ(servers.Metric(standby, "trainyard_server_is_leader"), 0);
  std::string metrics = HttpGet(servers.http_address(standby), "/metrics").body;
  EXPECT_EQ(MetricSample(metrics, absl::StrCat("trainyard_standby_leader_info{leader=\"", servers.address(leader),
                                               "\",url=\"", leader_url, "\"}")),
            1)
      << metrics;
  // A text Prometheus takes as it is.
  std::string promtool = ProgramOnPath("promtool");
  ASSERT_FALSE(promtool.empty()) << "promtool is not installed (Debian's prometheus package; run scripts/setup)";
  std::string file = servers.dir() + "/standby-metrics.txt", out = servers.dir() + "/promtool.out";
  WriteFile(file, metrics);
  int status = std::system(absl::StrCat("'", promtool, "' check metrics < '", file, "' > '", out, "' 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(out);
  EXPECT_EQ(ReadFile(out), "") << "promtool's findings";
}

TEST(LeaderFailoverTest, AStandbyTakesOverTheStateAndTheRunningTasksWhenTheLeaderIsKilled) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  EXPECT_FALSE(servers.LogSays(1, "listening on"));

  servers.StartAgent();
  std::string first = servers.Submit("before-failover");
  ASSERT_TRUE(servers.WaitRunning(first)) << servers.Describe(first).dump();
  nlohmann::json before = servers.Describe(first);
  // The leader says so in /metrics: the revision it writes under, and since when.
  double first_revision = servers.Metric(0, "trainyard_leader_revision");
  EXPECT_GT(first_revision, 0);
  EXPECT_GT(servers.Metric(0, "trainyard_leader_since_timestamp_seconds"), 0);
  // `trainyard status` names the leader, its store and who waits.
  nlohmann::json status;
  ASSERT_TRUE(WaitUntil([&] {
    status = servers.Status();
    return status.value("standbys", nlohmann::json::array()).size() == 1;
  }, absl::Seconds(30))) << status.dump();
  EXPECT_EQ(status.value("server_address", ""), servers.address(0)) << status.dump();
  EXPECT_EQ(status.value("store", ""), "etcd");
  EXPECT_EQ(status["standbys"][0], servers.address(1)) << status.dump();
  EXPECT_EQ(status.value("leader_revision", int64_t{0}), static_cast<int64_t>(first_revision));
  const int64_t terms = status.value("leader_terms", int64_t{0});
  EXPECT_GE(terms, 1) << status.dump();
  EXPECT_EQ(servers.Metric(0, "trainyard_leader_terms"), static_cast<double>(terms));
  CommandResult text = servers.Cli({"status"});
  EXPECT_NE(text.out.find("Standbys:   " + servers.address(1)), std::string::npos) << text.out;
  // The dashboard's overview says the same.
  nlohmann::json overview = servers.Overview(0);
  ASSERT_TRUE(overview.is_object()) << overview.dump();
  nlohmann::json plane = overview.value("control_plane", nlohmann::json::object());
  EXPECT_EQ(plane.value("server_address", ""), servers.address(0)) << plane.dump();
  EXPECT_EQ(plane.value("store", ""), "etcd") << plane.dump();
  EXPECT_EQ(plane.value("leader_terms", int64_t{0}), terms) << plane.dump();
  EXPECT_EQ(plane.value("standbys", nlohmann::json::array()), nlohmann::json::array({servers.address(1)}))
      << plane.dump();

  // The standby's HTTP address sends callers to the leader's: the REST API
  // (a 307 to the same path), the dashboard (a browser lands on the
  // leader's); its /metrics says it does not lead.
  ExpectStandbySendsTo(servers, 1, 0);

  servers.server(0).Kill();
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  EXPECT_TRUE(servers.LogSays(1, "this server leads"));
  // The door gave the address over to the new leader's own HTTP API.
  EXPECT_EQ(servers.Metric(1, "trainyard_server_is_leader"), 1);
  EXPECT_EQ(HttpGet(servers.http_address(1), "/readyz").status, 200);

  // The new leader knows the job and its task runs on, not started again.
  std::string second = servers.Submit("after-failover");
  ASSERT_TRUE(servers.WaitRunning(second)) << servers.Describe(second).dump();
  nlohmann::json after = servers.Describe(first);
  EXPECT_EQ(after.value("state", ""), "RUNNING") << after.dump();
  ASSERT_EQ(after["tasks"].size(), before["tasks"].size()) << after.dump();
  ASSERT_GE(after["tasks"].size(), 1u) << after.dump();  // the worker (and the job master)
  for (size_t i = 0; i < after["tasks"].size(); ++i) {
    const nlohmann::json& task = after["tasks"][i];
    EXPECT_EQ(task.value("name", ""), before["tasks"][i].value("name", ""));
    EXPECT_EQ(task.value("state", ""), "RUNNING") << task.dump();
    EXPECT_EQ(task.value("attempt", -1), before["tasks"][i].value("attempt", -2)) << task.dump();
    EXPECT_EQ(task.value("restarts", -1), 0) << task.dump();
  }
  // A new leader, a higher fence.
  EXPECT_GT(servers.Metric(1, "trainyard_leader_revision"), first_revision);
  // One more leadership; the killed server is no longer listed.
  nlohmann::json after_status = servers.Status();
  EXPECT_EQ(after_status.value("server_address", ""), servers.address(1)) << after_status.dump();
  EXPECT_EQ(after_status.value("leader_terms", int64_t{0}), terms + 1) << after_status.dump();
  EXPECT_TRUE(after_status.value("standbys", nlohmann::json::array()).empty()) << after_status.dump();
  CommandResult nodes = servers.Cli({"nodes"});
  EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_EQ(nodes.out.find("LOST"), std::string::npos) << nodes.out;
}

// What one leader issued holds at the next, though the next never had the
// first's data dir: the admin's token (only in the first server's token
// file), a user's token made through the leader, a running job's user
// credential (made under the jobs' secret) and a join token made there and
// used after the failover. The servers keep these files in etcd.
TEST(LeaderFailoverTest, TheNextLeaderHoldsTheTokensAndTheJobCredentialsTheFirstIssued) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address(), /*admin_in=*/1);
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  EXPECT_FALSE(std::filesystem::exists(security::TokenFilePath(servers.data_dir(1))));

  CommandResult made = servers.Cli({"token", "create", "alice"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string alice(absl::StripAsciiWhitespace(made.out));
  CommandResult join = servers.Cli({"token", "create", "--join", "node-j"});
  ASSERT_EQ(join.exit_code, 0) << join.err;
  std::string join_token(absl::StripAsciiWhitespace(join.out));
  // A job whose task keeps its user credential where the test reads it.
  servers.StartAgent();
  std::string cred_file = servers.dir() + "/credential";
  std::string spec = absl::StrCat(R"(name: keeps-credential
replicas:
  worker:
    count: 1
    userCredential: true
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'printf %s "$TRAINYARD_TOKEN" > )", cred_file, R"(.tmp && mv )", cred_file, R"(.tmp )",
                                  cred_file, R"(; exec sleep 600']
)");
  std::string spec_path = servers.dir() + "/keeps-credential.yaml";
  WriteFile(spec_path, spec);
  CommandResult submitted = servers.Cli({"submit", spec_path});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  ASSERT_TRUE(servers.WaitRunning("keeps-credential")) << servers.Describe("keeps-credential").dump();
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(cred_file).empty(); }, absl::Seconds(30)));
  std::string credential = ReadFile(cred_file);

  servers.server(0).Kill();
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  EXPECT_TRUE(servers.LogSays(1, "the cluster's copy from the store")) << ReadFile(servers.log(1));

  // The admin (this process's token) is served by the new leader.
  CommandResult jobs = servers.Cli({"jobs"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("keeps-credential"), std::string::npos) << jobs.out;
  // So are alice, and the job's credential, which speaks as the job's user.
  for (const std::string& token : {alice, credential}) {
    CommandResult as = RunCli({"jobs", "--server", servers.list()}, absl::Seconds(60),
                              {"TRAINYARD_TOKEN=" + token});
    EXPECT_EQ(as.exit_code, 0) << as.err;
  }
  CommandResult whoami = RunCli({"jobs", "--server", servers.list()}, absl::Seconds(60),
                                {"TRAINYARD_TOKEN=tyt_not-a-token"});
  EXPECT_NE(whoami.exit_code, 0) << "a made-up token was taken: " << whoami.out;
  // A node joins with the token the first leader made, through the list.
  servers.StartAgent("node-j", {"--join-token", join_token, "--ca-pin", security::CertPin(ClusterCaPem())});
  ASSERT_TRUE(WaitUntil([&] {
    for (absl::string_view line : absl::StrSplit(servers.Cli({"nodes"}).out, '\n')) {
      if (absl::StartsWith(line, "node-j ") && absl::StrContains(line, "READY")) return true;
    }
    return false;
  }, absl::Seconds(60))) << ReadFile(servers.dir() + "/node-j.log");
}

// Job masters and tasks are given every server (--cluster-servers), so what
// they tell the server reaches the next leader: a running job's master
// reports its figures to the new leader, and a task's TRAINYARD_SERVER is
// the list. The old leader killed (its connections refused at once) or
// paused (the master's calls time out until a ping goes unanswered).
void MasterFollowsTheLeader(bool pause) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  servers.StartAgent();
  const std::string server_file = servers.dir() + "/trainyard-server";
  std::string spec_path = servers.dir() + "/told.yaml";
  WriteFile(spec_path, absl::StrCat(R"(name: told
replicas:
  worker:
    count: 1
    userCredential: true
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'printf %s "$TRAINYARD_SERVER" > )", server_file, R"(.tmp && mv )", server_file, R"(.tmp )",
                                    server_file, R"(; exec sleep 600']
)"));
  CommandResult submitted = servers.Cli({"submit", spec_path});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(server_file).empty(); }, absl::Seconds(60)));
  EXPECT_EQ(ReadFile(server_file), servers.list());
  // The job's master reports to the leader...
  ASSERT_TRUE(WaitUntil([&] { return servers.Metric(0, "trainyard_jobmasters_reporting") >= 1; }, absl::Seconds(60)))
      << servers.Cli({"logs", "told", "jobmaster/0"}).out;

  if (pause) {
    ASSERT_EQ(kill(servers.server(0).pid(), SIGSTOP), 0);
  } else {
    servers.server(0).Kill();
  }
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  // ... and then to the next one, the same master (no task started again).
  EXPECT_TRUE(WaitUntil([&] { return servers.Metric(1, "trainyard_jobmasters_reporting") >= 1; }, absl::Seconds(60)))
      << servers.Cli({"logs", "told", "jobmaster/0"}).out;
  nlohmann::json job = servers.Describe("told");
  for (const nlohmann::json& task : job.value("tasks", nlohmann::json::array())) {
    EXPECT_EQ(task.value("attempt", -1), 0) << task.dump();
  }
}

// A preemption decided after a failover: the next leader orders the
// victim's checkpoint, the victim's master (started by the first leader)
// hears it and reports the step its workers saved to the next leader, which
// records it and stops the tasks at once, not after the grace.
TEST(LeaderFailoverTest, AJobMasterReportsItsCheckpointToTheNextLeader) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  // A grace far longer than the test waits: the victim must be stopped
  // because its workers saved, not because the grace ran out.
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby({"--preemption-grace-ms", "600000"}));
  servers.StartAgent();
  const std::string out = servers.dir() + "/out";
  std::filesystem::create_directories(out);
  // Workers that step until told to save, save once, report the step. The
  // node's two GPUs are theirs.
  const std::string bin = TrainyardBin();
  const std::string script = absl::StrCat(
      "step=0; ", bin, " worker state RUNNING || exit 1; while true; do step=$((step+1)); sleep 0.05; if ", bin,
      " worker checkpoint-requested > /dev/null; then echo $step >> ", out, "/saved-$TRAINYARD_INDEX; ", bin,
      " worker checkpoint-done $step || exit 1; fi; done");
  WriteFile(servers.dir() + "/low.yaml",
            absl::StrCat("name: low\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n"
                         "    resources: {gpus: 1}\n    command: [sh, -c, '", script, "']\n"));
  CommandResult submitted = servers.Cli({"submit", servers.dir() + "/low.yaml"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  ASSERT_TRUE(servers.WaitRunning("low")) << servers.Describe("low").dump();
  ASSERT_TRUE(WaitUntil([&] { return servers.Metric(0, "trainyard_jobmasters_reporting") >= 1; }, absl::Seconds(60)))
      << servers.Cli({"logs", "low", "jobmaster/0"}).out;

  servers.server(0).Kill();
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  // The production job that needs the node's GPUs comes to the next leader.
  WriteFile(servers.dir() + "/urgent.yaml", "name: urgent\npriority: production\nreplicas:\n  worker:\n"
                                            "    resources: {gpus: 2}\n    command: [sh, -c, 'sleep 1']\n");
  submitted = servers.Cli({"submit", servers.dir() + "/urgent.yaml"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  ASSERT_TRUE(WaitUntil([&] { return servers.Describe("urgent").value("state", "") == "SUCCEEDED"; },
                        absl::Seconds(120), absl::Milliseconds(200)))
      << servers.Describe("low").dump(2) << servers.Cli({"logs", "low", "jobmaster/0"}).err;
  std::vector<int64_t> saved0 = NumberLines(ReadFile(out + "/saved-0"));
  std::vector<int64_t> saved1 = NumberLines(ReadFile(out + "/saved-1"));
  ASSERT_FALSE(saved0.empty());
  ASSERT_FALSE(saved1.empty());
  nlohmann::json d = servers.Describe("low");
  ASSERT_TRUE(d.contains("events")) << d.dump();
  bool checkpointed = false;
  for (const nlohmann::json& e : d["events"]) {
    checkpointed |= e.value("kind", "") == "checkpointed" &&
                    e.value("text", "").find(absl::StrCat("2 workers saved step ", std::min(saved0[0], saved1[0]), ";")) !=
                        std::string::npos;
  }
  EXPECT_TRUE(checkpointed) << d.dump(2);
}

TEST(LeaderFailoverTest, JobMastersAndTasksAreGivenEveryServerAndReachTheNextLeader) { MasterFollowsTheLeader(false); }

TEST(LeaderFailoverTest, AJobMasterLeavesAPausedLeaderForTheNext) { MasterFollowsTheLeader(true); }

// `trainyard logs -f` given the list of servers goes on through a failover:
// the stream the old leader held ends (at once when it is killed; when it
// is paused, after a keepalive ping goes unanswered) and is opened again at
// the new one from the last line printed, and every line shows once, in
// order.
void FollowThroughAFailover(bool pause) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  servers.StartAgent();
  constexpr int kLines = 150;
  std::string spec_path = servers.dir() + "/counts.yaml";
  WriteFile(spec_path, absl::StrCat(R"(name: counts
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'i=1; while [ $i -le )", kLines, R"( ]; do echo line-$i; i=$((i+1)); sleep 0.1; done']
)"));
  CommandResult submitted = servers.Cli({"submit", spec_path});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  ASSERT_TRUE(servers.WaitRunning("counts")) << servers.Describe("counts").dump();

  // The follower, its stdout and stderr in files of their own.
  const std::string out = servers.dir() + "/follow.out", err = servers.dir() + "/follow.err";
  Process follower({"/bin/sh", "-c", "TRAINYARD_TOKEN=$1 TRAINYARD_CA_FILE=$2 exec \"$3\" logs -f counts worker/0 --server $4 >\"$5\" 2>\"$6\"",
                    "sh", AdminToken(), ClusterCaFile(), TrainyardBin(), servers.list(), out, err},
                   servers.dir() + "/follow.log");
  // The follower has the stream (it printed what came so far) before the
  // leader goes.
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(ReadFile(out), "line-12\n"); }, absl::Seconds(60)))
      << ReadFile(out) << ReadFile(err);
  if (pause) {
    ASSERT_EQ(kill(servers.server(0).pid(), SIGSTOP), 0);
  } else {
    servers.server(0).Kill();
  }
  ASSERT_TRUE(WaitUntil([&] { return !follower.Running(); }, absl::Seconds(120))) << ReadFile(out) << ReadFile(err);
  if (pause) {
    ASSERT_EQ(kill(servers.server(0).pid(), SIGCONT), 0);
  }
  CommandResult followed{follower.exit_status(), ReadFile(out), ReadFile(err)};

  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_TRUE(absl::StrContains(followed.err, "following on at the server that answers now")) << followed.err;
  std::string want;
  for (int i = 1; i <= kLines; ++i) absl::StrAppend(&want, "line-", i, "\n");
  EXPECT_EQ(followed.out, want) << followed.err << servers.Cli({"describe", "counts"}).out << "SERVER1\n" << ReadFile(servers.log(1)) << "AGENT\n" << ReadFile(servers.dir() + "/node-0.log");
}

TEST(LeaderFailoverTest, AFollowedLogGoesOnThroughAFailoverWithEveryLineOnce) { FollowThroughAFailover(false); }

TEST(LeaderFailoverTest, AFollowedLogLeavesAPausedLeaderForTheNextWithEveryLineOnce) { FollowThroughAFailover(true); }

// `submit --wait` and `describe -w` follow a job through a failover to its
// end: a stream or call that found no server is made again at the next
// leader. The old leader killed, or paused (its calls end when a ping goes
// unanswered).
void WatchThroughAFailover(bool pause) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  servers.StartAgent();
  const std::string gate = servers.dir() + "/go";
  const std::string spec = servers.dir() + "/waited.yaml";
  WriteFile(spec, absl::StrCat("name: waited\nreplicas:\n  worker:\n    count: 1\n"
                               "    resources: {cpu: 100m, memory: 64Mi}\n"
                               "    command: [sh, -c, 'while [ ! -e ", gate, " ]; do sleep 0.1; done']\n"));
  // Each watcher a process of its own, its stdout and stderr in files.
  auto start = [&](const std::string& name, const std::string& args) {
    return std::make_unique<Process>(
        std::vector<std::string>{"/bin/sh", "-c",
                                 absl::StrCat("TRAINYARD_TOKEN=$1 TRAINYARD_CA_FILE=$2 exec \"$3\" ", args,
                                              " --server $4 >\"$5\" 2>\"$6\""),
                                 "sh", AdminToken(), ClusterCaFile(), TrainyardBin(), servers.list(),
                                 servers.dir() + "/" + name + ".out", servers.dir() + "/" + name + ".err"},
        servers.dir() + "/" + name + ".log");
  };
  auto out = [&](const std::string& name) { return ReadFile(servers.dir() + "/" + name + ".out"); };
  auto err = [&](const std::string& name) { return ReadFile(servers.dir() + "/" + name + ".err"); };
  std::unique_ptr<Process> waiter = start("waiter", "submit " + spec + " --wait");
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(out("waiter"), "waited: RUNNING\n"); }, absl::Seconds(60)))
      << out("waiter") << err("waiter");
  std::unique_ptr<Process> describer = start("describer", "describe waited -w");
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(out("describer"), "State:      RUNNING"); }, absl::Seconds(60)))
      << out("describer") << err("describer");

  if (pause) {
    ASSERT_EQ(kill(servers.server(0).pid(), SIGSTOP), 0);
  } else {
    servers.server(0).Kill();
  }
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  // The waiter's stream to the old leader ends (at once when it was
  // killed, after the unanswered ping when paused) before the job does.
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(err("waiter"), "asking the servers again"); },
                        absl::Seconds(60)))
      << out("waiter") << err("waiter");
  WriteFile(gate, "");
  bool ended = WaitUntil([&] { return !waiter->Running() && !describer->Running(); }, absl::Seconds(120));
  if (pause) kill(servers.server(0).pid(), SIGCONT);
  ASSERT_TRUE(ended) << out("waiter") << err("waiter") << out("describer") << err("describer");

  EXPECT_EQ(waiter->exit_status(), 0) << err("waiter");
  EXPECT_TRUE(absl::StrContains(out("waiter"), "\nwaited: SUCCEEDED")) << out("waiter") << err("waiter");
  EXPECT_EQ(describer->exit_status(), 0) << err("describer");
  EXPECT_TRUE(absl::StrContains(out("describer"), "State:      SUCCEEDED")) << out("describer") << err("describer");
}

TEST(LeaderFailoverTest, SubmitWaitAndDescribeWatchFollowAJobThroughAFailover) { WatchThroughAFailover(false); }

TEST(LeaderFailoverTest, SubmitWaitAndDescribeWatchLeaveAPausedLeaderForTheNext) { WatchThroughAFailover(true); }

TEST(LeaderFailoverTest, ALeaderPausedPastItsLeaseWakesDeposedAndExitsWithoutServing) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  servers.StartAgent();
  const std::string agent_log = servers.dir() + "/node-0.log";
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(agent_log).find("registered with") != std::string::npos; },
                        absl::Seconds(60)))
      << ReadFile(agent_log);
  // The server says where the agent reached it.
  EXPECT_NE(ReadFile(agent_log).find("(reached at " + servers.agent_address(0) + ")"), std::string::npos)
      << ReadFile(agent_log);

  ASSERT_EQ(kill(servers.server(0).pid(), SIGSTOP), 0);
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  std::string job = servers.Submit("while-paused");
  // Once the paused leader goes silent, the agent tries it last, so the
  // connect timeout it would hold an attempt for is not spent first.
  ASSERT_TRUE(WaitUntil([&] {
    return ReadFile(agent_log).find("(reached at " + servers.agent_address(1) + ")") != std::string::npos;
  }, absl::Seconds(60))) << ReadFile(agent_log);
  EXPECT_NE(ReadFile(agent_log).find(absl::StrCat("trying the servers in the order ", servers.agent_address(1), ",",
                                                  servers.agent_address(0))),
            std::string::npos)
      << ReadFile(agent_log);
  ASSERT_EQ(kill(servers.server(0).pid(), SIGCONT), 0);

  // The woken leader finds its lease gone and leaves, status 75.
  ASSERT_TRUE(WaitUntil([&] { return !servers.server(0).Running(); }, absl::Seconds(30)))
      << ReadFile(servers.log(0));
  EXPECT_TRUE(servers.LogSays(0, "no longer the leader")) << ReadFile(servers.log(0));
  EXPECT_EQ(servers.server(0).exit_status(), 75);
  // The new leader serves on, with the job it took.
  CommandResult jobs = servers.Cli({"jobs"});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find(job), std::string::npos) << jobs.out;

  // Started again, as a supervisor would, it waits as a standby and the
  // deposition is counted: the leader shows it under the reason the old
  // one said (whichever of its threads learnt it first).
  std::string said = ReadFile(servers.log(0));
  size_t at = said.find("no longer the leader (");
  ASSERT_NE(at, std::string::npos) << said;
  at += std::string("no longer the leader (").size();
  std::string reason = said.substr(at, said.find(')', at) - at);
  EXPECT_TRUE(reason == "paused" || reason == "lease_lost" || reason == "fenced" || reason == "write_unknown")
      << reason;
  servers.Start(0);
  ASSERT_TRUE(servers.WaitLogSays(0, "counted in etcd")) << ReadFile(servers.log(0));
  ASSERT_TRUE(WaitUntil([&] {
    return servers.Metric(1, absl::StrCat("trainyard_leader_depositions_total{reason=\"", reason, "\"}")) == 1;
  }, absl::Seconds(30))) << HttpGet(servers.http_address(1), "/metrics").body;
  double all = 0;
  for (const char* r : {"fenced", "write_unknown", "lease_lost", "paused"}) {
    all += servers.Metric(1, absl::StrCat("trainyard_leader_depositions_total{reason=\"", r, "\"}"));
  }
  EXPECT_EQ(all, 1);
}

// `trainyard login` on a server's host writes every server of the cluster
// (--cluster-servers) into the user's client config, so the user's CLI
// follows the leader as the admin's does.
TEST(LeaderFailoverTest, ALoginGivesEveryServerAndTheUserFollowsTheNextLeader) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  ASSERT_NO_FATAL_FAILURE(servers.StartLeaderAndStandby());
  TempDir home;
  // Only what the login writes: none of the test's own credentials.
  const std::vector<std::string> env{"HOME=" + home.path(), "TRAINYARD_TOKEN", "TRAINYARD_CONFIG",
                                     "TRAINYARD_CA_FILE", "TRAINYARD_SERVER"};
  CommandResult login =
      RunCommandLine({TrainyardBin(), "login", "--socket", servers.data_dir(0) + "/login.sock"}, absl::Seconds(60), env);
  ASSERT_EQ(login.exit_code, 0) << login.err;
  EXPECT_NE(login.out.find(" on " + servers.list() + "; client config written"), std::string::npos) << login.out;

  servers.server(0).Kill();
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  CommandResult status = RunCommandLine({TrainyardBin(), "status"}, absl::Seconds(60), env);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("Server:     " + servers.address(1)), std::string::npos) << status.out;
}

// A write the fence refuses: the election key is gone from etcd (here
// removed by hand) while the leader still holds its lease. etcd itself
// refuses the leader's next write; the leader leaves at once, the write
// is not acknowledged, and when it starts again the refusal is counted
// where `trainyard status`, /metrics and the dashboard show it.
TEST(LeaderFailoverTest, AWriteTheFenceRefusesDeposesTheLeaderAndIsCounted) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Servers servers(etcd.address());
  servers.Start(0);
  ASSERT_TRUE(servers.WaitLogSays(0, "listening on")) << ReadFile(servers.log(0));
  CommandResult before = servers.Cli({"status"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_NE(before.out.find("Deposed:    none"), std::string::npos) << before.out;
  EXPECT_EQ(servers.Metric(0, "trainyard_leader_depositions_total{reason=\"fenced\"}"), 0);

  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd_client = EtcdClient::Connect(etcd.connect_options());
  ASSERT_TRUE(etcd_client.ok()) << etcd_client.status();
  etcdserverpb::TxnRequest remove;
  remove.add_success()->mutable_request_delete_range()->set_key("/trainyard/leader");
  ASSERT_TRUE((*etcd_client)->Txn(remove).ok());

  std::string spec = servers.dir() + "/refused.yaml";
  WriteFile(spec, LeaderFailoverSpec("refused"));
  CommandResult submit = servers.Cli({"submit", spec});
  EXPECT_NE(submit.exit_code, 0) << "a write etcd refused was acknowledged: " << submit.out;
  ASSERT_TRUE(WaitUntil([&] { return !servers.server(0).Running(); }, absl::Seconds(30))) << ReadFile(servers.log(0));
  EXPECT_EQ(servers.server(0).exit_status(), 75);
  EXPECT_TRUE(servers.LogSays(0, "no longer the leader (fenced)")) << ReadFile(servers.log(0));

  servers.Start(0);
  ASSERT_TRUE(servers.WaitLogSays(0, "counted in etcd")) << ReadFile(servers.log(0));
  CommandResult status;
  ASSERT_TRUE(WaitUntil([&] {
    status = servers.Cli({"status"});
    return status.exit_code == 0 && status.out.find("Deposed:    1 fenced") != std::string::npos;
  }, absl::Seconds(60))) << status.out << status.err << ReadFile(servers.log(0));
  EXPECT_NE(status.out.find("the latest " + servers.address(0)), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("its write was refused"), std::string::npos) << status.out;
  EXPECT_EQ(servers.Metric(0, "trainyard_leader_depositions_total{reason=\"fenced\"}"), 1);
  EXPECT_EQ(servers.Metric(0, "trainyard_leader_depositions_total{reason=\"paused\"}"), 0);
  nlohmann::json shown = servers.Overview(0)["control_plane"]["depositions"];
  ASSERT_TRUE(shown.is_array()) << servers.Overview(0).dump();
  bool fenced_shown = false;
  for (const nlohmann::json& d : shown) {
    if (d.value("reason", "") == "fenced") fenced_shown = d.value("count", 0) == 1;
  }
  EXPECT_TRUE(fenced_shown) << shown.dump();
  // What etcd refused is not there.
  EXPECT_EQ(servers.Cli({"describe", "refused"}).exit_code == 0, false);
}

// etcd as production runs it: TLS on its client port, a client certificate
// required. A server given only the CA cannot get in and says so; servers
// given the certificate lead, keep the state there and take over from each
// other over TLS.
TEST(LeaderFailoverTest, ServersUseAnEtcdThatRequiresTlsAndAClientCertificate) {
  TempDir certs;
  absl::StatusOr<store_test::EtcdTlsFiles> tls = store_test::MakeEtcdTlsFiles(certs.path(), {"127.0.0.1"});
  ASSERT_TRUE(tls.ok()) << tls.status();
  store_test::EtcdTestCluster etcd(std::vector<store_test::EtcdMemberHost>(1), *tls);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  ASSERT_EQ(etcd.address().rfind("etcds://", 0), 0u) << etcd.address();
  Servers servers(etcd.address());

  // Without a client certificate etcd refuses the handshake: the server
  // waits for etcd, saying why, and never serves.
  servers.Start(0, {"--etcd-ca", tls->ca_file});
  ASSERT_TRUE(servers.WaitLogSays(0, "cannot reach etcd")) << ReadFile(servers.log(0));
  EXPECT_FALSE(servers.LogSays(0, "listening on")) << ReadFile(servers.log(0));
  EXPECT_TRUE(servers.server(0).Running()) << ReadFile(servers.log(0));
  servers.server(0).Kill();

  const std::vector<std::string> client = {"--etcd-ca", tls->ca_file, "--etcd-cert", tls->client_cert_file,
                                           "--etcd-key", tls->client_key_file};
  servers.Start(1, client);
  ASSERT_TRUE(servers.WaitLogSays(1, "listening on")) << ReadFile(servers.log(1));
  std::string job = servers.Submit("over-tls");
  servers.Start(0, client);
  ASSERT_TRUE(servers.WaitLogSays(0, "standby:")) << ReadFile(servers.log(0));
  servers.server(1).Kill();
  ASSERT_TRUE(servers.WaitLogSays(0, "listening on")) << ReadFile(servers.log(0));
  // The new leader read the job back from etcd over TLS.
  CommandResult jobs = servers.Cli({"jobs"});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find(job), std::string::npos) << jobs.out;
  nlohmann::json status = servers.Status();
  EXPECT_EQ(status.value("server_address", ""), servers.address(0)) << status.dump();
  EXPECT_EQ(status.value("store", ""), "etcd") << status.dump();
}

}  // namespace
}  // namespace trainyard::testing
