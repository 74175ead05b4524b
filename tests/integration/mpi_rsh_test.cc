// MPI across nodes without ssh: mpirun in the launcher task starts its
// daemons through `trainyard rsh`, which runs them in the job's worker task
// on each node (its rank host, `trainyard rsh --serve`), authorized by the
// job's secret. The cluster's two agents have addresses of their own: each
// runs in a network namespace of its own, joined to this host by a veth pair
// the test makes (and removes), and reaches the server through it; where
// namespaces cannot be made, two agents on distinct loopback addresses.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/hosts.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

std::string AllreduceBin() {
  return (std::filesystem::path(TrainyardBin()).parent_path() / "examples/trainyard-mpi-allreduce").string();
}

TEST(MpiRshTest, FourRanksAllreduceAcrossTwoNodesThroughTrainyardRsh) {
  if (!std::filesystem::exists(AllreduceBin())) GTEST_SKIP() << "Open MPI is not installed (scripts/setup)";
  Hosts nets(2);
  Cluster cluster({.nodes = 0, .server_flags = {"--agent-listen", "0.0.0.0:0"}, .tls = false});
  std::string agent_port = cluster.agent_address().substr(cluster.agent_address().rfind(':') + 1);
  std::string users = cluster.dir() + "/task-users";
  WriteFile(users, absl::StrCat("\"*\": ", getuid(), "\n"));
  std::vector<std::unique_ptr<Process>> agents;
  std::vector<std::string> addresses;
  for (int n = 1; n <= 2; ++n) {
    std::string name = absl::StrCat("node-", n);
    std::vector<std::string> argv;
    std::string server;
    if (nets.ready()) {
      // A host of its own: its network namespace, and a host name of its own
      // (Open MPI tells nodes apart by name). unshare, ip and sh each exec the
      // next, so the agent keeps the pid Process stops.
      argv = nets.In(n, {}, name);
      server = absl::StrCat(nets.test_side(n), ":", agent_port);
      addresses.push_back(nets.address(n));  // no --address: the one toward the server
    } else {
      server = absl::StrCat("127.0.0.1:", agent_port);
      addresses.push_back(absl::StrCat("127.0.0.", n + 1));
    }
    std::vector<std::string> agent = {TrainyardBin(), "agent", "--server", server, "--agent-server", server,
                                      "--name", name, "--data-dir", cluster.dir() + "/" + name, "--simulate-gpus",
                                      "0", "--memory-mb", "8192", "--vcores", "2.5", "--kill-tasks-on-exit",
                                      "--task-user-map", users};
    if (!nets.ready()) agent.insert(agent.end(), {"--address", addresses.back()});
    if (getuid() == 0) agent.push_back("--allow-root-tasks");
    argv.insert(argv.end(), agent.begin(), agent.end());
    agents.push_back(std::make_unique<Process>(argv, absl::StrCat(cluster.dir(), "/", name, ".log")));
  }
  std::cerr << (nets.ready() ? "agents in network namespaces " : "agents on loopback addresses ") << addresses[0]
            << ", " << addresses[1] << "\n";
  ASSERT_TRUE(cluster.WaitNodesReady(2, absl::Seconds(60)))
      << ReadFile(agents[0]->log()) << ReadFile(agents[1]->log());
  std::vector<std::string> seen;
  nlohmann::json nodes = cluster.Nodes();
  for (const auto& node : nodes["nodes"]) seen.push_back(node["info"].value("address", ""));
  EXPECT_THAT(seen, ::testing::UnorderedElementsAreArray(addresses));

  // 4 workers of 1 core on nodes of 2.5: two on each node, the launcher beside two of them.
  // On loopback both nodes have this host's name, and Open MPI would take
  // ranks of both for neighbours (shared memory): TCP between all then.
  std::string btl = nets.ready() ? "" : "    env: {OMPI_MCA_btl: 'tcp,self'}\n";
  std::string job = cluster.Submit(absl::StrCat(R"(name: allreduce
framework: mpi
replicas:
  launcher:
    count: 1
    resources: {cpu: 500m, memory: 256Mi}
    command: [sh, -c, 'exec mpirun --allow-run-as-root -hostfile "$TRAINYARD_MPI_HOSTFILE" -np 4 )",
                                                AllreduceBin(), "']\n", btl, R"(  worker:
    count: 4
    resources: {cpu: 1, memory: 256Mi}
    command: [sh, -c, 'exec "$TRAINYARD_BIN" rsh --serve']
)"));
  std::string state;
  ASSERT_TRUE(WaitUntil(
      [&] {
        state = cluster.JobState(job);
        return state == "SUCCEEDED" || state == "FAILED" || state == "KILLED";
      },
      absl::Seconds(180), absl::Milliseconds(100)));
  ASSERT_EQ(state, "SUCCEEDED") << cluster.Describe(job).dump(1) << cluster.Cli({"logs", job}).out
                                << cluster.Cli({"logs", job}).err;
  CommandResult launcher = cluster.Cli({"logs", job, "launcher/0"});
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(launcher.out, HasSubstr(absl::StrCat("rank ", rank, " of 4 on "))) << launcher.out;
  }
  size_t sums = 0;
  for (size_t at = launcher.out.find("allreduce sum 10 (expected 10)"); at != std::string::npos;
       at = launcher.out.find("allreduce sum 10 (expected 10)", at + 1)) {
    ++sums;
  }
  EXPECT_EQ(sums, 4u) << launcher.out;
  if (nets.ready()) {
    // Each node's host name: ranks ran on both.
    EXPECT_THAT(launcher.out, HasSubstr(" on node-1: ")) << launcher.out;
    EXPECT_THAT(launcher.out, HasSubstr(" on node-2: ")) << launcher.out;
  }
  // The workers on both nodes: each node's first worker ran mpirun's daemon.
  nlohmann::json described = cluster.Describe(job);
  std::set<std::string> worker_nodes;
  for (const auto& t : described["tasks"]) {
    if (t.value("role", "") == "worker") worker_nodes.insert(t.value("node", ""));
  }
  EXPECT_EQ(worker_nodes.size(), 2u) << described.dump(1);
  CommandResult workers = cluster.Cli({"logs", job});
  EXPECT_THAT(workers.out + workers.err, HasSubstr("trainyard rsh: running for")) << workers.out << workers.err;

  // What runs through a rank host stops with the job: a command started on
  // the other node is gone once the job is killed.
  std::string pid_file = cluster.dir() + "/remote.pid";
  std::string held = cluster.Submit(absl::StrCat(R"(name: held
framework: mpi
replicas:
  launcher:
    count: 1
    resources: {cpu: 500m, memory: 256Mi}
    command: [sh, -c, 'other=$(grep -v "^$TRAINYARD_NODE_ADDRESS " "$TRAINYARD_MPI_RANK_HOSTS" | cut -d" " -f1); exec "$TRAINYARD_BIN" rsh "$other" "echo \$\$ > )",
                                                 pid_file, R"(; exec sleep 1000"']
  worker:
    count: 2
    resources: {cpu: 2, memory: 256Mi}
    command: [sh, -c, 'exec "$TRAINYARD_BIN" rsh --serve']
)"));
  pid_t remote = 0;
  ASSERT_TRUE(WaitUntil([&] { return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &remote); },
                        absl::Seconds(60), absl::Milliseconds(50)))
      << cluster.Describe(held).dump(1) << cluster.Cli({"logs", held}).err;
  EXPECT_EQ(kill(remote, 0), 0) << "the command runs";
  ASSERT_EQ(cluster.Cli({"kill", held}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return kill(remote, 0) != 0 && errno == ESRCH; }, absl::Seconds(30),
                        absl::Milliseconds(50)))
      << "pid " << remote << " outlived its job";
  for (auto& a : agents) a->Stop();
}

// A daemon as a command might leave one: a grandchild of the command's
// shell that ignores SIGTERM and holds its output pipes; it writes its pid
// to `file` once it ignores SIGTERM.
std::string StubbornDaemon(const std::string& file) {
  return absl::StrCat("sh -c 'trap \"\" TERM; echo $$ > ", file, "; exec sleep 1000' & wait");
}

// The pid in `file` once a command has written it; 0 if none within 30 s.
pid_t PidWrittenTo(const std::string& file) {
  pid_t pid = 0;
  WaitUntil([&] { return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(file)), &pid) && pid > 0; },
            absl::Seconds(30), absl::Milliseconds(20));
  return pid;
}

// A rank host on this machine's loopback, serving for `secret`, and the
// environment of a caller in another task of its job.
class LoopbackRankHost {
 public:
  explicit LoopbackRankHost(const std::string& secret) : port_(FreePort()) {
    host_ = std::make_unique<Process>(
        std::vector<std::string>{"/usr/bin/env", "TRAINYARD_NODE_ADDRESS=127.0.0.1",
                                 absl::StrCat("TRAINYARD_PORTS=", port_), "TRAINYARD_JOB_SECRET=" + secret,
                                 TrainyardBin(), "rsh", "--serve"},
        dir_.path() + "/host.log");
    ready_ = WaitUntil([&] { return Log().find("listening on") != std::string::npos || !host_->Running(); },
                       absl::Seconds(20), absl::Milliseconds(20)) &&
             host_->Running();
    WriteFile(RankHosts(), absl::StrCat("127.0.0.1 ", port_, "\n"));
  }
  bool ready() const { return ready_; }
  int port() const { return port_; }
  std::string Log() const { return ReadFile(dir_.path() + "/host.log"); }
  std::string RankHosts() const { return dir_.path() + "/rank_hosts"; }
  const std::string& dir() const { return dir_.path(); }
  Process& process() { return *host_; }
  // A caller's environment (its own node is another), with `secret`.
  std::vector<std::string> CallerEnv(const std::string& secret) const {
    std::vector<std::string> env = {"TRAINYARD_NODE_ADDRESS=127.0.0.9", "TRAINYARD_NODE=node-9",
                                    "TRAINYARD_MPI_RANK_HOSTS=" + RankHosts()};
    if (!secret.empty()) env.push_back("TRAINYARD_JOB_SECRET=" + secret);
    return env;
  }
  // A caller with `secret` that has the rank host run a StubbornDaemon;
  // *daemon is its pid once it runs (0 if it does not within 30 s).
  std::unique_ptr<Process> StartDaemon(const std::string& secret, pid_t* daemon) const {
    std::string pid_file = dir() + "/daemon.pid";
    std::vector<std::string> argv = {"/usr/bin/env"};
    for (const std::string& e : CallerEnv(secret)) argv.push_back(e);
    argv.insert(argv.end(), {TrainyardBin(), "rsh", "127.0.0.1", StubbornDaemon(pid_file)});
    auto caller = std::make_unique<Process>(argv, dir() + "/caller.log");
    *daemon = PidWrittenTo(pid_file);
    return caller;
  }

 private:
  TempDir dir_;
  int port_;
  std::unique_ptr<Process> host_;
  bool ready_ = false;
};

// Ended: no such process, or a zombie that its parent has yet to reap.
bool Ended(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || stat.substr(paren + 2, 1) == "Z";
}

// Whether `pid` ends within 30 s; it is killed if not, so no test leaves it.
bool EndsSoon(pid_t pid) {
  if (WaitUntil([&] { return Ended(pid); }, absl::Seconds(30), absl::Milliseconds(20))) return true;
  kill(pid, SIGKILL);
  return false;
}

// The rank host as a caller meets it: the command's output and exit status
// come back; without the job's secret nothing runs.
TEST(MpiRshTest, ARankHostRunsOnlyForTheJobsSecret) {
  LoopbackRankHost host("s3cret");
  ASSERT_TRUE(host.ready()) << host.Log();
  CommandResult ran = RunCommandLine({TrainyardBin(), "rsh", "127.0.0.1", "echo", "out;", "echo", "err", ">&2;",
                                      "exit", "3"},
                                     absl::Seconds(30), host.CallerEnv("s3cret"));
  EXPECT_EQ(ran.exit_code, 3) << ran.err;
  EXPECT_EQ(ran.out, "out\n");
  EXPECT_EQ(ran.err, "err\n");
  CommandResult refused = RunCommandLine({TrainyardBin(), "rsh", "127.0.0.1", "touch", host.dir() + "/ran"},
                                         absl::Seconds(30), host.CallerEnv("guess"));
  EXPECT_EQ(refused.exit_code, 255);
  EXPECT_THAT(refused.err, HasSubstr("not this job's secret"));
  EXPECT_FALSE(std::filesystem::exists(host.dir() + "/ran"));
  EXPECT_THAT(host.Log(), HasSubstr("refused 127.0.0.1:"));
  CommandResult unknown =
      RunCommandLine({TrainyardBin(), "rsh", "127.0.0.7", "true"}, absl::Seconds(30), host.CallerEnv(""));
  EXPECT_EQ(unknown.exit_code, 255);
  EXPECT_THAT(unknown.err, HasSubstr("127.0.0.7 is not the address of a node of this job's MPI workers"));
  host.process().Stop();
}

// Another user's task that took the rank host's port first sees no secret
// from `trainyard rsh`, and its answer is not taken for the command's.
TEST(MpiRshTest, AProcessOnTheRankHostsPortGetsNoSecretAndIsNotTrusted) {
  TempDir dir;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  WriteFile(dir.path() + "/rank_hosts", absl::StrCat("127.0.0.1 ", ntohs(addr.sin_port), "\n"));
  std::string heard;
  std::thread squatter([&] {
    int conn = accept(listener, nullptr, nullptr);
    if (conn < 0) return;
    // A challenge as a rank host's, then whatever comes within a second,
    // then a made-up proof and output.
    std::string frames = std::string("C\x20\0\0\0", 5) + std::string(32, 'n') + std::string("A\x20\0\0\0", 5) +
                         std::string(32, 'p') + std::string("O\x06\0\0\0", 5) + "forged" +
                         std::string("X\x01\0\0\0", 5) + "0";
    EXPECT_EQ(write(conn, frames.data(), 5 + 32), 5 + 32);
    pollfd p{conn, POLLIN, 0};
    char buf[4096];
    while (poll(&p, 1, 1000) > 0) {
      ssize_t n = read(conn, buf, sizeof(buf));
      if (n <= 0) break;
      heard.append(buf, static_cast<size_t>(n));
      if (heard.size() >= 5 + 64 + 4) break;  // a hello of the new wire, or the secret and a command
    }
    EXPECT_EQ(write(conn, frames.data() + 5 + 32, frames.size() - 5 - 32),
              static_cast<ssize_t>(frames.size() - 5 - 32));
    close(conn);
  });
  CommandResult ran = RunCommandLine({TrainyardBin(), "rsh", "127.0.0.1", "echo", "hi"}, absl::Seconds(30),
                                     {"TRAINYARD_NODE_ADDRESS=127.0.0.9", "TRAINYARD_NODE=node-9",
                                      "TRAINYARD_MPI_RANK_HOSTS=" + dir.path() + "/rank_hosts",
                                      "TRAINYARD_JOB_SECRET=s3cret-of-the-job"});
  squatter.join();
  close(listener);
  EXPECT_FALSE(heard.empty()) << "the caller sent nothing";
  EXPECT_EQ(heard.find("s3cret-of-the-job"), std::string::npos) << "the secret crossed the wire";
  EXPECT_EQ(ran.exit_code, 255) << ran.err;
  EXPECT_EQ(ran.out, "");
  EXPECT_THAT(ran.err, HasSubstr("did not prove it holds the job's secret"));
}

// mpirun stops its `trainyard rsh` when it ends or fails: what that caller
// started on the other node goes, all of it (a daemon its shell forked
// included), and the rank host stops relaying it.
TEST(MpiRshTest, AKilledCallersCommandIsStoppedWhole) {
  LoopbackRankHost host("s3cret");
  ASSERT_TRUE(host.ready()) << host.Log();
  pid_t daemon = 0;
  std::unique_ptr<Process> caller = host.StartDaemon("s3cret", &daemon);
  ASSERT_GT(daemon, 0) << host.Log() << ReadFile(caller->log());
  EXPECT_FALSE(Ended(daemon));
  caller->Kill();
  EXPECT_TRUE(EndsSoon(daemon)) << "pid " << daemon << " outlived its caller";
  EXPECT_TRUE(WaitUntil([&] { return host.Log().find("trainyard rsh: ended for") != std::string::npos; },
                        absl::Seconds(30), absl::Milliseconds(20)))
      << host.Log();
  host.process().Stop();
}

// The job ends: its rank host is stopped (SIGTERM to the task), and stops
// the commands it runs, which are in process groups of their own.
TEST(MpiRshTest, AStoppedRankHostStopsItsCommands) {
  LoopbackRankHost host("s3cret");
  ASSERT_TRUE(host.ready()) << host.Log();
  pid_t daemon = 0;
  std::unique_ptr<Process> caller = host.StartDaemon("s3cret", &daemon);
  ASSERT_GT(daemon, 0) << host.Log() << ReadFile(caller->log());
  kill(host.process().pid(), SIGTERM);
  EXPECT_TRUE(EndsSoon(daemon)) << "pid " << daemon << " outlived its rank host";
  EXPECT_TRUE(WaitUntil([&] { return !host.process().Running(); }, absl::Seconds(30), absl::Milliseconds(20)));
  caller->Stop();
}

}  // namespace
}  // namespace trainyard::testing
