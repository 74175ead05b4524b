// Ports end to end: a second server on a running server's port refuses to
// start; ports in use on a node are not handed out; `trainyard up` gives
// every simulated node its own address and ports; a gang of tasks asking
// for the same fixed port starts across nodes.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

TEST(PortsTest, SecondServerOnTheSamePortRefusesToStart) {
  ClusterOptions options;
  options.nodes = 1;
  Cluster c(options);
  TempDir other;
  CommandResult r = RunCli({"server", "--listen", c.address(), "--data-dir", other.path()}, absl::Seconds(20));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, -2) << "the second server kept running";
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("cannot bind ", c.address())));
  EXPECT_THAT(r.err, HasSubstr("in use"));
  // The first one still serves its node.
  EXPECT_EQ(c.Nodes().size(), 1u);
}

// A listening TCP socket on 127.0.0.1:port, closed by the destructor. With
// SO_REUSEADDR, as a server binds: the cluster's port block may have served
// an earlier test's job master, whose closed connections keep the port in
// TIME_WAIT for a minute, and a bind without it fails then.
class Listener {
 public:
  explicit Listener(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd_, 4) == 0;
  }
  ~Listener() { close(fd_); }
  bool ok() const { return ok_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// "address:port" of every port of every task of a describe JSON.
std::vector<std::string> Endpoints(const nlohmann::json& d) {
  std::vector<std::string> out;
  for (const auto& t : d["tasks"]) {
    for (const auto& r : t["ports"]) {
      for (int p = r.value("begin", 0); p <= r.value("end", 0); ++p) {
        out.push_back(absl::StrCat(t.value("node_address", ""), ":", p));
      }
    }
  }
  return out;
}

TEST(PortsTest, APortInUseOnTheNodeIsNotGivenToATask) {
  ClusterOptions options;
  options.nodes = 1;
  Cluster c(options);
  int first = c.Nodes()["nodes"][0]["info"]["capacity"]["ports"][0].value("begin", 0);
  ASSERT_GT(first, 0);
  // Something else listens on the node's lowest port when its agent
  // registers; the job master, which gets the lowest free port, would
  // crash-loop on "address already in use" if it were given it.
  c.agent(0).Stop();
  Listener other(first);
  ASSERT_TRUE(other.ok());
  c.RestartAgent(0);
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string job = c.Submit(R"(
name: inuse
replicas:
  worker:
    resources: {cpu: 100m, memory: 64Mi, ports: 1}
    command: [sh, -c, 'true']
)");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  std::vector<std::string> endpoints = Endpoints(c.Describe(job));
  EXPECT_FALSE(endpoints.empty());
  for (const std::string& e : endpoints) EXPECT_NE(e, absl::StrCat("127.0.0.1:", first));
}

TEST(PortsTest, ARangeOverlappingTheEphemeralRangeIsServedWithAWarning) {
  ClusterOptions options;
  options.nodes = 0;
  Cluster c(options);
  int lo = 0, hi = 0;
  std::istringstream(ReadFile("/proc/sys/net/ipv4/ip_local_port_range")) >> lo >> hi;
  ASSERT_GT(lo, 1100);
  std::vector<std::string> argv = {TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "eph", "--data-dir",
                                   c.dir() + "/eph", "--simulate-gpus", "0", "--memory-mb", "1024", "--vcores", "1",
                                   "--port-range", absl::StrCat("[", lo - 10, "-", lo + 9, "]"), "--address",
                                   "127.0.0.1", "--kill-tasks-on-exit"};
  for (const std::string& flag : AgentTlsFlags("eph")) argv.push_back(flag);
  Process agent(argv, c.dir() + "/eph.log");
  std::string want = absl::StrCat("node eph: ports ", lo, "-", lo + 9, " of its agent's --port-range ", lo - 10,
                                  "-", lo + 9, " lie in the node's ephemeral range ", lo, "-", hi);
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(c.dir() + "/server.log").find(want) != std::string::npos; },
                      absl::Seconds(20)))
      << ReadFile(c.dir() + "/server.log");
  agent.Stop();
}

// `trainyard up --nodes 2` on a free port, in a temporary directory.
class Up {
 public:
  Up() : port_(FreePortPair()), process_({TrainyardBin(), "up", "--nodes", "2", "--port", absl::StrCat(port_),
                                      "--data-dir", dir_.path() + "/up"},
                                     dir_.path() + "/up.log") {}
  ~Up() { process_.Stop(absl::Seconds(30)); }
  bool Ready() {
    return WaitUntil([&] { return ReadFile(process_.log()).find("Trainyard is up") != std::string::npos; },
                   absl::Seconds(60));
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  const std::string& dir() const { return dir_.path(); }
  std::string log() const { return ReadFile(process_.log()); }
  // Submits `yaml` and returns the job's name ("" on failure).
  std::string Submit(const std::string& name, const std::string& yaml) {
    std::string path = absl::StrCat(dir(), "/", name, ".yaml");
    WriteFile(path, yaml);
    CommandResult r = RunCli({"submit", path, "--server", address()}, absl::Seconds(60), UpClientEnv(dir() + "/up"));
    size_t a = r.out.find("job "), b = r.out.find(" submitted");
    return a == std::string::npos || b == std::string::npos ? "" : r.out.substr(a + 4, b - a - 4);
  }
  nlohmann::json Describe(const std::string& job) {
    CommandResult r =
        RunCli({"describe", job, "-o", "json", "--server", address()}, absl::Seconds(60), UpClientEnv(dir() + "/up"));
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

 private:
  TempDir dir_;
  int port_;
  Process process_;
};

TEST(PortsTest, UpGivesEachNodeItsOwnAddressAndPortsSoJobsOnTwoNodesDoNotCollide) {
  Up up;
  ASSERT_TRUE(up.Ready()) << up.log();
  std::string out = up.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  // Each task binds its port on every address (as a parameter server or
  // PyTorch's store does) and holds it until the other job's task has too.
  WriteFile(out + "/hold.py",
            "import os, socket, sys, time\n"
            "out, me, other = sys.argv[1:4]\n"
            "s = socket.socket()\n"
            "s.bind(('0.0.0.0', int(os.environ['TRAINYARD_PORTS'].split(',')[0])))\n"
            "s.listen()\n"
            "open(f'{out}/{me}', 'w').write(os.environ['TRAINYARD_NODE_ADDRESS'])\n"
            "end = time.time() + 30\n"
            "while time.time() < end and not os.path.exists(f'{out}/{other}'):\n"
            "    time.sleep(0.05)\n"
            "sys.exit(0 if os.path.exists(f'{out}/{other}') else 3)\n");
  auto spec = [&](int node, const std::string& me, const std::string& other) {
    return absl::StrCat("name: on", node, "\nnodeName: node-", node, R"(
replicas:
  worker:
    resources: {cpu: 100m, memory: 64Mi, ports: 1}
    command: [/usr/bin/python3, ')", out, "/hold.py', '", out, "', ", me, ", ", other, "]\n");
  };
  std::string a = up.Submit("a", spec(0, "a", "b"));
  std::string b = up.Submit("b", spec(1, "b", "a"));
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  auto done = [&](const std::string& job) {
    std::string st = up.Describe(job).value("state", "");
    return st == "SUCCEEDED" || st == "FAILED" || st == "KILLED";
  };
  ASSERT_TRUE(WaitUntil([&] { return done(a) && done(b); }, absl::Seconds(60), absl::Milliseconds(100)));
  nlohmann::json da = up.Describe(a), db = up.Describe(b);
  EXPECT_EQ(da.value("state", ""), "SUCCEEDED") << da.dump(2);
  EXPECT_EQ(db.value("state", ""), "SUCCEEDED") << db.dump(2);
  EXPECT_EQ(ReadFile(out + "/a"), "127.0.0.2");
  EXPECT_EQ(ReadFile(out + "/b"), "127.0.0.3");
  std::vector<std::string> all = Endpoints(da);
  for (const std::string& e : Endpoints(db)) all.push_back(e);
  EXPECT_GE(all.size(), 2u) << "at least each job's worker";
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size()) << da.dump(2) << db.dump(2);
}

}  // namespace
}  // namespace trainyard::testing
