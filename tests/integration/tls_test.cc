// TLS and node identity with real processes (docs/security.md,
// "Components"): an agent proves its node's name with a certificate of the
// cluster's CA; nothing else joins, and clients verify the server. The
// stranger runs as another uid (65534 through setpriv) where it can.
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kNobody = 65534;

// The node names the server lists, with their states.
std::map<std::string, std::string> NodeStates(Cluster& c) {
  std::map<std::string, std::string> out;
  for (const auto& n : c.Nodes().value("nodes", nlohmann::json::array())) {
    out[n["info"].value("name", "")] = n["info"].value("state", "");
  }
  return out;
}

// argv run as uid 65534 when this test is root and setpriv exists; else as
// this uid.
std::vector<std::string> AsStranger(std::vector<std::string> argv, bool* other_uid) {
  *other_uid = getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0;
  if (!*other_uid) return argv;
  std::vector<std::string> out = {"/usr/bin/setpriv", "--reuid", absl::StrCat(kNobody), "--regid",
                                  absl::StrCat(kNobody), "--clear-groups"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// A directory the stranger owns.
std::string StrangerDir(const TempDir& dir, bool other_uid) {
  std::string path = dir.path() + "/stranger";
  std::filesystem::create_directories(path);
  chmod(dir.path().c_str(), 0755);
  if (other_uid && chown(path.c_str(), kNobody, kNobody) != 0) return "";
  return path;
}

TEST(TlsTest, AnAgentWithAnotherCasCertificateNeverBecomesANode) {
  Cluster c({.nodes = 1});
  TempDir dir;
  bool other_uid = false;
  AsStranger({}, &other_uid);
  std::string home = StrangerDir(dir, other_uid);
  ASSERT_FALSE(home.empty());
  // The stranger makes a CA of its own and a certificate for a node name.
  CommandResult init = RunCommandLine(AsStranger({TrainyardBin(), "certs", "init", "--dir", home + "/certs"}, &other_uid),
                                      absl::Seconds(20));
  ASSERT_EQ(init.exit_code, 0) << init.err;
  CommandResult node = RunCommandLine(
      AsStranger({TrainyardBin(), "certs", "node", "evil", "--dir", home + "/certs"}, &other_uid), absl::Seconds(20));
  ASSERT_EQ(node.exit_code, 0) << node.err;
  std::cout << "the stranger runs as " << (other_uid ? "uid 65534" : "this uid") << "\n";
  // It trusts the cluster's CA (public) and presents its own certificate.
  Process agent(AsStranger({TrainyardBin(), "agent", "--server", c.address(), "--name", "evil", "--data-dir",
                            home + "/data", "--simulate-gpus", "8", "--ca", ClusterCaFile(), "--cert",
                            home + "/certs/nodes/evil.crt", "--key", home + "/certs/nodes/evil.key"},
                           &other_uid),
                dir.path() + "/evil.log");
  ASSERT_TRUE(WaitFor([&] { return ReadFile(agent.log()).find("cannot reach the server") != std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(agent.log());
  EXPECT_THAT(ReadFile(agent.log()), Not(HasSubstr("registered with")));
  std::map<std::string, std::string> nodes = NodeStates(c);
  EXPECT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes.count("evil"), 0u);
  agent.Stop();
}

TEST(TlsTest, ANodesCertificateCannotTakeAnotherNodesNameAndItsOwnAgentGetsItBack) {
  // Not declared lost while its agent is away: its tasks wait for it.
  Cluster c({.nodes = 2, .node_timeout_ms = 60000});
  std::string job = c.Submit(R"(
name: pinned
replicas:
  worker:
    count: 2
    resources: {cpu: 100m, memory: 64Mi, gpus: 8}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);
  // node-1's agent goes away (its tasks keep running under their keepers).
  c.agent(1).Kill();
  ASSERT_TRUE(WaitFor([&] { return ReadFile(c.dir() + "/server.log").find("node node-1 disconnected") != std::string::npos; },
                      absl::Seconds(20)));
  // node-0's certificate (a node taken over) asks for node-1's name.
  std::vector<std::string> argv = {TrainyardBin(), "agent", "--server", c.address(), "--name", "node-1",
                                   "--data-dir", c.dir() + "/impostor", "--simulate-gpus", "8"};
  for (const std::string& flag : AgentTlsFlags("node-0")) argv.push_back(flag);
  Process impostor(argv, c.dir() + "/impostor.log");
  ASSERT_TRUE(WaitFor([&] { return ReadFile(impostor.log()).find("the server refused this node") != std::string::npos; },
                      absl::Seconds(20)))
      << ReadFile(impostor.log());
  EXPECT_THAT(ReadFile(impostor.log()), HasSubstr("certificate is node 'node-0''s: it cannot register as node 'node-1'"));
  // node-1's own agent (its certificate) gets its name back while the impostor keeps trying.
  c.RestartAgent(1);
  EXPECT_TRUE(c.WaitNodesReady(2)) << c.Nodes().dump(2);
  EXPECT_EQ(NodeStates(c)["node-1"], "READY");
  EXPECT_THAT(ReadFile(c.agent(1).log()), HasSubstr("registered with"));
  // Its task is the one that ran before: adopted, not restarted.
  EXPECT_EQ(c.JobState(job), "RUNNING") << c.Describe(job).dump(2);
  for (const auto& t : c.Describe(job).value("tasks", nlohmann::json::array())) {
    EXPECT_EQ(t.value("restarts", 0), 0) << t.dump();
    EXPECT_EQ(t.value("state", ""), "RUNNING") << t.dump();
  }
  EXPECT_THAT(ReadFile(impostor.log()), Not(HasSubstr("registered with")));
  impostor.Stop();
}

TEST(TlsTest, PlaintextAgentsAndClientsAreRefused) {
  Cluster c({.nodes = 1});
  Process agent({TrainyardBin(), "agent", "--server", c.address(), "--name", "plain", "--data-dir",
                 c.dir() + "/plain", "--simulate-gpus", "2"},
                c.dir() + "/plain.log");
  ASSERT_TRUE(WaitFor([&] { return ReadFile(agent.log()).find("cannot reach the server") != std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(agent.log());
  EXPECT_THAT(ReadFile(agent.log()), HasSubstr("needs --ca, --cert and --key"));
  EXPECT_EQ(NodeStates(c).count("plain"), 0u);
  agent.Stop();
  CommandResult r = c.Cli({"nodes"}, {"TRAINYARD_CA_FILE", "TRAINYARD_CONFIG=/dev/null"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("needs its CA: --ca, TRAINYARD_CA_FILE or caFile"));
}

TEST(TlsTest, ACliTrustingAnotherCaExitsThreeNamingIt) {
  Cluster c({.nodes = 1});
  TempDir other;
  CommandResult init = RunCli({"certs", "init", "--dir", other.path() + "/certs"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  std::string ca = other.path() + "/certs/ca.crt";
  CommandResult r = c.Cli({"nodes", "--ca", ca});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("signed by the CA in " + ca));
  // The same through the environment; and the cluster's own CA works.
  EXPECT_EQ(c.Cli({"nodes"}, {"TRAINYARD_CA_FILE=" + ca}).exit_code, 3);
  CommandResult ok = c.Cli({"nodes"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

}  // namespace
}  // namespace trainyard::testing
