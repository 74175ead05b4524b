// A Jepsen-style loop against the highly available control plane: three etcd
// members, three servers and two agents, each on a host of its own (a
// network namespace, tests/integration/hosts.h), and a client that submits
// and kills jobs all along. Each round, chosen by a seeded random number
// generator, does one fault: kill -9 of the leader, the leader paused past
// its lease and woken, an etcd member killed and started again, or the
// leader's host cut off from everyone and healed. Servers run as under a
// supervisor (systemd's Restart=always): one that exits is started again a
// second later, as a standby. After every round, with the client held:
//  - no acknowledged submission is lost, every acknowledged kill ended its
//    job, and no job FAILED (its tasks only sleep: a failure is a task lost);
//  - no GPU or port is given to two running tasks;
//  - no task runs twice (each task's processes write a file named by their
//    pid, and the test counts the live ones);
//  - no job is both RUNNING and ended: an ended job has no live process, a
//    running one has each task's process alive;
//  - every task that ran at the round's start and was not killed still runs,
//    as the same process, in the same attempt;
//  - every node is READY again (its agent back with the leader).
// TRAINYARD_CHAOS_ROUNDS (default: one of each fault) and
// TRAINYARD_CHAOS_SEED choose the run; bench/ha_chaos.py runs long ones.
// Without namespaces (not root), everything runs on loopback and a cut is
// replaced by a pause.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "security/certs.h"
#include "security/tokens.h"
#include "tests/etcd/etcd_test_cluster.h"
#include "tests/integration/harness.h"
#include "tests/integration/hosts.h"

namespace trainyard::testing {
namespace {

constexpr int kMembers = 3;
constexpr int kServers = 3;
constexpr int kAgents = 2;
constexpr int kGpusPerNode = 4;
// Jobs the client keeps at most (killing one at random above it): more than
// the cluster's GPUs, so some wait and are placed as kills free room.
constexpr int kLiveJobs = 10;

enum class Fault { kKillLeader, kPauseLeader, kKillEtcdMember, kCutLeader };
constexpr Fault kFaults[] = {Fault::kKillLeader, Fault::kPauseLeader, Fault::kKillEtcdMember, Fault::kCutLeader};

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kKillLeader: return "kill -9 of the leader";
    case Fault::kPauseLeader: return "the leader paused past its lease, then woken";
    case Fault::kKillEtcdMember: return "an etcd member killed, then started again";
    case Fault::kCutLeader: return "the leader's host cut off, then healed";
  }
  return "?";
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : fallback;
}

// Hosts: 1..3 etcd members, 4..6 servers, 7..8 agents.
int EtcdHost(int member) { return 1 + member; }
int ServerHost(int server) { return 1 + kMembers + server; }
int AgentHost(int agent) { return 1 + kMembers + kServers + agent; }

// A task of a running job, as the views and the processes show it.
struct RunningTask {
  int attempt = -1;
  pid_t pid = -1;
};

class ChaosCluster {
 public:
  ChaosCluster() : hosts_(kMembers + kServers + kAgents) {
    std::vector<store_test::EtcdMemberHost> members(kMembers);
    for (int m = 0; m < kMembers; ++m) {
      if (hosts_.ready()) members[m] = {hosts_.In(EtcdHost(m), {}), hosts_.address(EtcdHost(m))};
    }
    etcd_ = std::make_unique<store_test::EtcdTestCluster>(members);
    std::filesystem::create_directories(pids_dir());
    std::vector<std::string> names;
    for (int i = 0; i < kServers; ++i) {
      ports_[i] = FreePortPair();
      names.push_back(hosts_.ready() ? hosts_.address(ServerHost(i)) : "127.0.0.1");
      std::string data = data_dir(i);
      absl::Status added = security::AddToken(security::TokenFilePath(data), AdminToken(), "admin", true);
      EXPECT_TRUE(added.ok()) << added;
    }
    // Every server's certificate names every server's address: clients
    // check the name of the first address of their list.
    absl::StatusOr<security::InitResult> certs = security::InitCertDir(certs_dir(), names);
    EXPECT_TRUE(certs.ok()) << certs.status();
    for (int a = 0; a < kAgents; ++a) {
      absl::Status made = security::MakeNodeCert(certs_dir(), absl::StrCat("node-", a));
      EXPECT_TRUE(made.ok()) << made;
    }
  }

  ~ChaosCluster() {
    if (::testing::Test::HasFailure()) {
      // What a failure needs to be understood: the last words of everyone.
      std::vector<std::string> logs;
      for (int i = 0; i < kServers; ++i) logs.push_back(log(i));
      for (int a = 0; a < kAgents; ++a) logs.push_back(absl::StrCat(dir_.path(), "/node-", a, ".log"));
      for (const std::string& path : logs) {
        std::string text = ReadFile(path);
        std::cerr << "---- " << path << " (last 6000 bytes)\n"
                  << (text.size() > 6000 ? text.substr(text.size() - 6000) : text) << "\n";
      }
    }
    for (auto& a : agents_) a.reset();
    for (int i = 0; i < kServers; ++i) {
      if (paused_[i] && servers_[i]) kill(servers_[i]->pid(), SIGCONT);
      servers_[i].reset();
    }
  }

  bool namespaces() const { return hosts_.ready(); }
  Hosts& hosts() { return hosts_; }
  store_test::EtcdTestCluster& etcd() { return *etcd_; }

  std::string address(int i) const {
    return absl::StrCat(hosts_.ready() ? hosts_.address(ServerHost(i)) : "127.0.0.1", ":", ports_[i]);
  }
  std::string agent_address(int i) const {
    return absl::StrCat(hosts_.ready() ? hosts_.address(ServerHost(i)) : "127.0.0.1", ":", ports_[i] + 1);
  }
  std::string list() const {
    std::vector<std::string> out;
    for (int i = 0; i < kServers; ++i) out.push_back(address(i));
    return absl::StrJoin(out, ",");
  }
  std::string agent_list() const {
    std::vector<std::string> out;
    for (int i = 0; i < kServers; ++i) out.push_back(agent_address(i));
    return absl::StrJoin(out, ",");
  }
  std::string data_dir(int i) const { return absl::StrCat(dir_.path(), "/server-", i); }
  std::string certs_dir() const { return dir_.path() + "/certs"; }
  std::string pids_dir() const { return dir_.path() + "/pids"; }
  std::string log(int i) const { return absl::StrCat(dir_.path(), "/server-", i, ".log"); }
  Process& server(int i) { return *servers_[i]; }

  void StartServer(int i) {
    std::vector<std::string> argv = {TrainyardBin(), "server", "--listen", address(i), "--data-dir", data_dir(i),
                                     "--store", etcd_->address(), "--leader-lease-ms", "1000", "--tls-dir",
                                     certs_dir(), "--node-timeout-ms", "15000", "--heartbeat-interval-ms", "500",
                                     "--kill-grace-ms", "1000", "--checkpoint-root", dir_.path() + "/checkpoints"};
    if (hosts_.ready()) argv = hosts_.In(ServerHost(i), argv);
    log_skip_[i] = ReadFile(log(i)).size();  // appended across restarts
    servers_[i] = std::make_unique<Process>(argv, log(i));
    exited_at_[i] = absl::InfinitePast();
    ++starts_[i];
  }

  void StartAgent(int a) {
    std::string name = absl::StrCat("node-", a);
    std::string users = absl::StrCat(dir_.path(), "/", name, "-users");
    WriteFile(users, absl::StrCat("\"*\": ", getuid(), "\n"));
    std::string own = hosts_.ready() ? hosts_.address(AgentHost(a)) : "127.0.0.1";
    int begin = 20000 + a * 100;
    std::vector<std::string> argv = {
        TrainyardBin(), "agent", "--server", list(), "--agent-server", agent_list(), "--name", name,
        "--data-dir", absl::StrCat(dir_.path(), "/", name), "--simulate-gpus", absl::StrCat(kGpusPerNode),
        "--memory-mb", "8192", "--vcores", "8", "--address", own, "--port-range",
        absl::StrCat("[", begin, "-", begin + 49, "]"), "--kill-tasks-on-exit", "--task-user-map", users,
        "--ca", security::CaCertPath(certs_dir()), "--cert", security::NodeCertPath(certs_dir(), name), "--key",
        security::NodeKeyPath(certs_dir(), name)};
    if (getuid() == 0) argv.push_back("--allow-root-tasks");
    if (hosts_.ready()) argv = hosts_.In(AgentHost(a), argv);
    agents_.push_back(std::make_unique<Process>(argv, absl::StrCat(dir_.path(), "/", name, ".log")));
  }

  std::string LogSince(int i) {
    std::string text = ReadFile(log(i));
    return log_skip_[i] < text.size() ? text.substr(log_skip_[i]) : "";
  }
  // What server i said last of its part: "listening on" (it leads),
  // "standby:" (it waits) or "no longer the leader" (deposed).
  std::string LastSaid(int i) {
    std::string log = LogSince(i);
    std::string last;
    size_t at = 0;
    for (const char* word : {"listening on", "standby:", "no longer the leader"}) {
      size_t found = log.rfind(word);
      if (found != std::string::npos && (last.empty() || found > at)) {
        last = word;
        at = found;
      }
    }
    return last;
  }
  bool Leads(int i) {
    return servers_[i] && !paused_[i] && servers_[i]->Running() && LastSaid(i) == "listening on";
  }
  bool Standby(int i) { return servers_[i] && servers_[i]->Running() && LastSaid(i) == "standby:"; }
  // Times server i was started, and times it was seen to have exited.
  int starts(int i) const { return starts_[i]; }
  int exits(int i) const { return exits_[i]; }
  int Leader() {
    for (int i = 0; i < kServers; ++i) {
      if (Leads(i)) return i;
    }
    return -1;
  }

  // The supervisor: a server that exited is started again a second later.
  // A deposed leader exits 75; any other end (but a kill -9 of the test's)
  // is a failure. Called from every wait.
  void Supervise() {
    for (int i = 0; i < kServers; ++i) {
      if (paused_[i] || !servers_[i] || servers_[i]->Running()) continue;
      if (exited_at_[i] == absl::InfinitePast()) {
        exited_at_[i] = absl::Now();
        ++exits_[i];
        int status = servers_[i]->exit_status();
        if (!killed_[i]) {
          EXPECT_EQ(status, 75) << "server " << i << " ended other than deposed:\n" << LogSince(i);
          if (status == 75) {
            EXPECT_NE(LogSince(i).find("no longer the leader"), std::string::npos) << LogSince(i);
          }
        }
        killed_[i] = false;
      }
      if (absl::Now() - exited_at_[i] >= absl::Seconds(1)) StartServer(i);
    }
  }
  bool Wait(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(60)) {
    return WaitUntil([&] {
      Supervise();
      return done();
    }, timeout, absl::Milliseconds(50));
  }

  void KillServer(int i) {
    killed_[i] = true;
    kill(servers_[i]->pid(), SIGKILL);
  }
  void Pause(int i) {
    paused_[i] = true;
    kill(servers_[i]->pid(), SIGSTOP);
  }
  void Wake(int i) {
    kill(servers_[i]->pid(), SIGCONT);
    paused_[i] = false;
  }

  CommandResult Cli(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(60)) {
    args.insert(args.end(), {"--server", list()});
    return RunCli(args, timeout, {"TRAINYARD_CA_FILE=" + security::CaCertPath(certs_dir())});
  }

  // Nodes READY in `trainyard nodes`.
  int ReadyNodes() {
    CommandResult r = Cli({"nodes"});
    int ready = 0;
    for (size_t at = r.out.find(" READY "); at != std::string::npos; at = r.out.find(" READY ", at + 1)) ++ready;
    return r.exit_code == 0 ? ready : -1;
  }

  // A job of one task on a GPU and a port that runs until killed; a probe
  // (a submission that tells a leader serves) ends at once and holds nothing.
  std::string SpecFile(const std::string& name, bool probe = false) {
    std::string path = absl::StrCat(dir_.path(), "/", name, ".yaml");
    if (probe) {
      WriteFile(path, absl::StrCat("name: ", name, R"(
jobmaster: false
replicas:
  worker:
    count: 1
    resources: {cpu: 10m, memory: 16Mi}
    command: ["true"]
)"));
      return path;
    }
    // Each process of the task leaves a file named by job, task and pid.
    WriteFile(path, absl::StrCat("name: ", name, R"(
jobmaster: false
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 32Mi, gpus: 1, ports: 1}
    command: [sh, -c, 'touch )", pids_dir(), R"(/$TRAINYARD_JOB.$TRAINYARD_ROLE-$TRAINYARD_INDEX.$$ && exec sleep 3600']
)"));
    return path;
  }

  // The live processes of each task ("JOB.ROLE-INDEX" -> pids).
  std::map<std::string, std::vector<pid_t>> LiveProcesses() {
    std::map<std::string, std::vector<pid_t>> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(pids_dir(), ec)) {
      std::string file = entry.path().filename().string();
      size_t dot = file.rfind('.');
      int pid = 0;
      if (dot == std::string::npos || !absl::SimpleAtoi(file.substr(dot + 1), &pid)) continue;
      // Alive and still the task's (sh exec'd sleep: the same pid), not
      // another process that got the pid since: its environment names the job.
      std::string task = file.substr(0, dot);
      if (ReadFile(absl::StrCat("/proc/", pid, "/cmdline")).rfind("sleep", 0) != 0) continue;
      std::string env = ReadFile(absl::StrCat("/proc/", pid, "/environ"));
      std::string job = absl::StrCat("TRAINYARD_JOB=", task.substr(0, task.find('.')));
      if (env.find(job + std::string(1, '\0')) == std::string::npos) continue;
      out[task].push_back(pid);
    }
    return out;
  }

 private:
  TempDir dir_;
  Hosts hosts_;
  std::unique_ptr<store_test::EtcdTestCluster> etcd_;
  int ports_[kServers] = {};
  size_t log_skip_[kServers] = {};
  bool paused_[kServers] = {};
  bool killed_[kServers] = {};
  absl::Time exited_at_[kServers] = {};
  int starts_[kServers] = {};
  int exits_[kServers] = {};
  std::unique_ptr<Process> servers_[kServers];
  std::vector<std::unique_ptr<Process>> agents_;
};

// The client: submits and kills all along, and records what was
// acknowledged. Hold() stops it between two calls.
class Client {
 public:
  Client(ChaosCluster* cluster, uint32_t seed) : cluster_(cluster), rng_(seed) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Client() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Hold() {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    cv_.wait(lock, [&] { return !busy_; });
  }
  void Go() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  // What was acknowledged (read while held).
  const std::set<std::string>& submitted() const { return submitted_; }
  const std::set<std::string>& killed() const { return killed_; }
  // Kills asked for, acknowledged or not (one not acknowledged may have
  // been done).
  const std::set<std::string>& tried_kills() const { return tried_kills_; }
  int refused() const { return refused_; }

 private:
  void Run() {
    for (int n = 0;; ++n) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_; });
        cv_.wait(lock, [&] { return stop_ || !held_; });
        if (stop_) return;
        busy_ = true;
      }
      std::string name = absl::StrCat("chaos-", n);
      CommandResult r = cluster_->Cli({"submit", cluster_->SpecFile(name)}, absl::Seconds(30));
      std::string victim;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (r.exit_code == 0) submitted_.insert(name);
        else ++refused_;  // not acknowledged: it may or may not exist
        std::vector<std::string> live;
        for (const std::string& job : submitted_) {
          if (!killed_.count(job)) live.push_back(job);
        }
        if (static_cast<int>(live.size()) > kLiveJobs) victim = live[rng_() % live.size()];
      }
      bool killed = !victim.empty() && cluster_->Cli({"kill", victim}, absl::Seconds(30)).exit_code == 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!victim.empty()) tried_kills_.insert(victim);  // acknowledged or not, it may have happened
        if (killed) killed_.insert(victim);
        busy_ = false;
      }
      cv_.notify_all();
    }
  }

  ChaosCluster* cluster_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, held_ = false, busy_ = false;
  std::set<std::string> submitted_, killed_, tried_kills_;
  int refused_ = 0;
  std::thread thread_;
};

bool IsEnded(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "KILLED" || state == "DEADLINE_EXCEEDED";
}

// The checks after a round, with the client held. `before`: the running
// tasks at the round's start; returns the running tasks now.
std::map<std::string, RunningTask> HaChaosCheckInvariants(ChaosCluster& c, const Client& client,
                                                   const std::map<std::string, RunningTask>& before,
                                                   const std::string& round) {
  SCOPED_TRACE(round);
  nlohmann::json jobs;
  std::map<std::string, std::vector<pid_t>> live;
  std::string why;
  // Settled: every kill has ended its job and its processes; every running
  // job's task has one live process.
  bool settled = c.Wait([&] {
    CommandResult r = c.Cli({"jobs", "-a", "-o", "json"}, absl::Seconds(30));
    if (r.exit_code != 0) return why = "jobs: " + r.err, false;
    jobs = nlohmann::json::parse(r.out, nullptr, false);
    if (jobs.is_discarded()) return why = "jobs: not JSON", false;
    live = c.LiveProcesses();
    for (const auto& job : jobs["jobs"]) {
      std::string name = job.value("name", ""), state = job.value("state", "");
      // An acknowledged kill ended the job (KILLED, or it had ended before);
      // nothing here fails on its own: a FAILED job is a task lost.
      if (client.killed().count(name) && !IsEnded(state)) return why = name + " killed but " + state, false;
      if (state == "FAILED") return why = name + " FAILED: " + job.value("message", ""), false;
      for (const auto& t : job["tasks"]) {
        std::string key = absl::StrCat(name, ".", t.value("role", ""), "-", t.value("index", -1));
        size_t n = live.count(key) ? live[key].size() : 0;
        bool running = state == "RUNNING" && t.value("state", "") == "RUNNING";
        if (IsEnded(state) && n > 0) return why = key + " of an ended job still runs", false;
        // A job ends at once when killed; its tasks once their agents say
        // they stopped.
        if (IsEnded(state) && t.value("state", "") == "RUNNING") return why = key + " RUNNING in a job " + state, false;
        if (running && n != 1) return why = absl::StrCat(key, " runs as ", n, " processes"), false;
      }
    }
    return true;
  }, absl::Seconds(90));
  EXPECT_TRUE(settled) << why;

  std::set<std::string> listed;
  std::set<std::pair<std::string, int>> gpus, ports;
  std::map<std::string, RunningTask> now;
  for (const auto& job : jobs["jobs"]) {
    std::string name = job.value("name", ""), state = job.value("state", "");
    listed.insert(name);
    for (const auto& t : job["tasks"]) {
      std::string key = absl::StrCat(name, ".", t.value("role", ""), "-", t.value("index", -1));
      if (t.value("state", "") != "RUNNING") continue;
      EXPECT_FALSE(IsEnded(state)) << key << " RUNNING in a job " << state;
      std::string node = t.value("node", "");
      for (const auto& g : t["gpu_mask_indices"]) {
        EXPECT_TRUE(gpus.insert({node, g.get<int>()}).second) << "GPU " << g << " of " << node << " given twice";
      }
      for (const auto& p : t["ports"]) {
        for (int port = p.value("begin", 0); port <= p.value("end", -1); ++port) {
          EXPECT_TRUE(ports.insert({node, port}).second) << "port " << port << " of " << node << " given twice";
        }
      }
      if (state == "RUNNING" && live.count(key) && live[key].size() == 1) {
        now[key] = {t.value("attempt", -1), live[key][0]};
      }
    }
  }
  for (const std::string& name : client.submitted()) {
    EXPECT_TRUE(listed.count(name)) << "acknowledged submission " << name << " lost";
  }
  for (const auto& [key, task] : before) {
    std::string job = key.substr(0, key.find('.'));
    if (client.tried_kills().count(job)) continue;
    auto it = now.find(key);
    if (it == now.end()) {
      ADD_FAILURE() << key << " ran before the round and does not now:\n" << c.Cli({"describe", job}).out;
      continue;
    }
    EXPECT_EQ(it->second.pid, task.pid) << key << " was started again:\n" << c.Cli({"describe", job}).out;
    EXPECT_EQ(it->second.attempt, task.attempt) << key << " is in another attempt";
  }
  // Every agent is back with the leader (a new leader shows a node LOST
  // until its agent registers again; its tasks stay where they are, as the
  // checks above saw).
  EXPECT_TRUE(c.Wait([&] { return c.ReadyNodes() == kAgents; })) << c.Cli({"nodes"}).out;
  return now;
}

TEST(HaChaosTest, SeededFaultsLoseNoAcknowledgedWorkAndStartNoTaskTwice) {
  const uint32_t seed = static_cast<uint32_t>(EnvInt("TRAINYARD_CHAOS_SEED", static_cast<int>(time(nullptr) % 100000)));
  const int rounds = EnvInt("TRAINYARD_CHAOS_ROUNDS", 4);
  std::cerr << "chaos seed " << seed << " (TRAINYARD_CHAOS_SEED), " << rounds << " rounds\n";
  std::mt19937 rng(seed);
  std::vector<Fault> plan(std::begin(kFaults), std::end(kFaults));
  std::shuffle(plan.begin(), plan.end(), rng);  // the first four: one of each
  while (static_cast<int>(plan.size()) < rounds) plan.push_back(kFaults[rng() % 4]);
  plan.resize(rounds);

  ChaosCluster c;
  ASSERT_TRUE(c.etcd().status().ok()) << c.etcd().status();
  std::cerr << (c.namespaces() ? "hosts in network namespaces\n" : "on loopback (no namespaces: cuts are pauses)\n");
  for (int i = 0; i < kServers; ++i) {
    c.StartServer(i);
    ASSERT_TRUE(c.Wait([&] { return c.Leads(i) || c.Standby(i); })) << c.LogSince(i);
  }
  for (int a = 0; a < kAgents; ++a) c.StartAgent(a);
  ASSERT_TRUE(c.Wait([&] { return c.ReadyNodes() == kAgents; })) << c.Cli({"nodes"}).out;

  Client client(&c, seed + 1);
  std::map<std::string, RunningTask> running;
  std::vector<double> failover_ms;
  for (int r = 0; r < rounds; ++r) {
    Fault fault = plan[r];
    if (fault == Fault::kCutLeader && !c.namespaces()) fault = Fault::kPauseLeader;
    std::string round = absl::StrCat("round ", r, " (seed ", seed, "): ", FaultName(fault));
    // Let the client work a little before the fault.
    client.Go();
    absl::SleepFor(absl::Milliseconds(500 + rng() % 1500));  // the fault's moment, not a wait for a condition
    int leader = -1;
    ASSERT_TRUE(c.Wait([&] { return (leader = c.Leader()) >= 0; })) << round << ": no leader";
    absl::Time start = absl::Now();
    const int starts = c.starts(leader), exits = c.exits(leader);
    int member = static_cast<int>(rng() % kMembers);
    switch (fault) {
      case Fault::kKillLeader: c.KillServer(leader); break;
      case Fault::kPauseLeader: c.Pause(leader); break;
      case Fault::kKillEtcdMember: c.etcd().Kill(member); break;
      case Fault::kCutLeader: ASSERT_TRUE(c.hosts().Cut(ServerHost(leader))) << round; break;
    }
    // A submission is acknowledged again (by a new leader, or with a member
    // down, by the same one).
    int probe = 0;
    bool served = c.Wait([&] {
      std::string name = absl::StrCat("probe-", r, "-", probe++);
      return c.Cli({"submit", c.SpecFile(name, /*probe=*/true)}, absl::Seconds(30)).exit_code == 0;
    }, absl::Seconds(60));
    ASSERT_TRUE(served) << round << ": no submission acknowledged after the fault";
    double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (fault != Fault::kKillEtcdMember) failover_ms.push_back(ms);
    std::cerr << round << ": a submission acknowledged " << static_cast<int>(ms) << " ms after the fault\n";
    // Every agent back with the leader while the old one is still silent
    // (paused or cut off): a new leader shows a node LOST until its agent
    // registers again.
    ASSERT_TRUE(c.Wait([&] { return c.ReadyNodes() == kAgents; }, absl::Seconds(60)))
        << round << ": the agents did not come back to the leader\n" << c.Cli({"nodes"}).out;
    std::cerr << round << ": every agent back with the leader "
              << static_cast<int>(absl::ToDoubleMilliseconds(absl::Now() - start)) << " ms after the fault\n";
    switch (fault) {
      case Fault::kKillLeader: break;
      case Fault::kPauseLeader:
        // Woken after a new leader serves: it must find itself deposed and
        // exit before it places, launches or kills anything.
        c.Wake(leader);
        break;
      case Fault::kKillEtcdMember: ASSERT_TRUE(c.etcd().Restart(member).ok()) << round; break;
      case Fault::kCutLeader:
        ASSERT_TRUE(c.Wait([&] { return c.exits(leader) > exits; }))
            << round << ": the cut-off leader did not step down\n" << c.LogSince(leader);
        ASSERT_TRUE(c.hosts().Heal(ServerHost(leader))) << round;
        break;
    }
    if (fault != Fault::kKillEtcdMember) {
      // Back as a standby, or (started again before a standby campaigned)
      // leading again.
      // It exited (deposed or killed) and was started again: back as a
      // standby, or (started before a standby campaigned) leading again.
      ASSERT_TRUE(c.Wait([&] { return c.starts(leader) > starts && (c.Standby(leader) || c.Leads(leader)); }))
          << round << ": the old leader is not back\n" << c.LogSince(leader);
    }
    client.Hold();
    running = HaChaosCheckInvariants(c, client, running, round);
    if (::testing::Test::HasFailure()) break;
  }
  client.Hold();
  std::sort(failover_ms.begin(), failover_ms.end());
  if (!failover_ms.empty()) {
    std::cerr << "chaos: " << rounds << " rounds, " << client.submitted().size() << " submissions and "
              << client.killed().size() << " kills acknowledged, " << client.refused()
              << " calls not acknowledged; failover (fault -> a submission acknowledged) p50 "
              << failover_ms[failover_ms.size() / 2] << " ms, max " << failover_ms.back() << " ms\n";
  }
  EXPECT_FALSE(client.submitted().empty());
}

}  // namespace
}  // namespace trainyard::testing
