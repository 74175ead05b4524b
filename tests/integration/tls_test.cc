// TLS and node identity with real processes (docs/security.md,
// "Components"): an agent proves its node's name with a certificate of the
// cluster's CA; nothing else joins, and clients verify the server. The
// stranger runs as another uid (65534 through setpriv) where it can.
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "security/certs.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// Opens an agent stream with node `cert_node`'s certificate (of the cluster
// CA) and registers `name`: OK when registered, else how it was refused.
grpc::Status RegisterWithCertOf(const Cluster& c, const std::string& cert_node, const std::string& name) {
  AgentTlsFlags(cert_node);  // makes its certificate
  const std::string& dir = ClusterCertDir();
  auto creds = grpc::SslCredentials({.pem_root_certs = ClusterCaPem(),
                                     .pem_private_key = ReadFile(security::NodeKeyPath(dir, cert_node)),
                                     .pem_cert_chain = ReadFile(security::NodeCertPath(dir, cert_node))});
  auto stub = v1::AgentChannel::NewStub(grpc::CreateChannel(c.agent_address(), creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->Connect(&ctx);
  v1::AgentMessage reg;
  reg.mutable_register_()->set_name(name);
  reg.mutable_register_()->set_address("127.0.0.1");
  reg.mutable_register_()->mutable_capacity()->set_memory_mb(1024);
  v1::ServerMessage answer;
  bool registered = stream->Write(reg) && stream->Read(&answer) && answer.has_registered();
  if (registered) ctx.TryCancel();
  grpc::Status st = stream->Finish();
  return registered ? grpc::Status::OK : st;
}

// How many TLS 1.3 session tickets the server at `address` (127.0.0.1:PORT)
// hands a client that presents node `cert_node`'s certificate ("": none) by
// the time the first application data (gRPC's HTTP/2 settings) has come; -1
// when the handshake or that exchange fails (within 10 s).
int TicketsFromServer(const std::string& address, const std::string& cert_node) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  const std::string ca_pem = ClusterCaPem();
  std::unique_ptr<BIO, decltype(&BIO_free)> ca_bio(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())),
                                                   BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> ca(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr), X509_free);
  if (!ctx || !ca || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca.get()) != 1) return -1;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (!cert_node.empty()) {
    AgentTlsFlags(cert_node);  // makes its certificate
    const std::string& dir = ClusterCertDir();
    if (SSL_CTX_use_certificate_file(ctx.get(), security::NodeCertPath(dir, cert_node).c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx.get(), security::NodeKeyPath(dir, cert_node).c_str(), SSL_FILETYPE_PEM) != 1) {
      return -1;
    }
  }
  static const unsigned char kH2[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kH2, sizeof(kH2));
  // Each ticket the client takes in is a new session handed to this callback.
  std::atomic<int> tickets{0};
  SSL_CTX_set_app_data(ctx.get(), &tickets);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx.get(), [](SSL* ssl, SSL_SESSION*) {
    ++*static_cast<std::atomic<int>*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    return 0;  // not kept
  });
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval ten_s{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &ten_s, sizeof(ten_s));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &ten_s, sizeof(ten_s));
  sockaddr_in sa{.sin_family = AF_INET, .sin_port = htons(std::stoi(address.substr(address.rfind(':') + 1))),
                 .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  int result = -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 && ssl && SSL_set_fd(ssl.get(), fd) == 1 &&
      SSL_connect(ssl.get()) == 1) {
    // HTTP/2's client preface and an empty SETTINGS frame: the server
    // answers with its own settings.
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    char first = 0;
    if (SSL_write(ssl.get(), kPreface, sizeof(kPreface) - 1) > 0 && SSL_read(ssl.get(), &first, 1) == 1) {
      result = tickets.load();
    }
  }
  ssl.reset();
  close(fd);
  return result;
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
  Process agent(AsStranger({TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "evil", "--data-dir",
                            home + "/data", "--simulate-gpus", "8", "--ca", ClusterCaFile(), "--cert",
                            home + "/certs/nodes/evil.crt", "--key", home + "/certs/nodes/evil.key"},
                           &other_uid),
                dir.path() + "/evil.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(agent.log()).find("cannot reach the server") != std::string::npos; },
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
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(c.dir() + "/server.log").find("node node-1 disconnected") != std::string::npos; },
                      absl::Seconds(20)));
  // node-0's certificate (a node taken over) asks for node-1's name: the
  // agent binary refuses such a command line itself, so a modified agent (a
  // raw stream here) asks the server, which refuses it.
  std::vector<std::string> argv = {TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "node-1",
                                   "--data-dir", c.dir() + "/impostor", "--simulate-gpus", "8"};
  for (const std::string& flag : AgentTlsFlags("node-0")) argv.push_back(flag);
  CommandResult own = RunCommandLine(argv, absl::Seconds(20));
  EXPECT_EQ(own.exit_code, 2) << own.err;
  EXPECT_THAT(own.err, HasSubstr("is node 'node-0''s"));
  grpc::Status refused = RegisterWithCertOf(c, "node-0", "node-1");
  EXPECT_EQ(refused.error_code(), grpc::PERMISSION_DENIED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("certificate is node 'node-0''s: it cannot register as node 'node-1'"));
  EXPECT_THAT(ReadFile(c.dir() + "/server.log"), HasSubstr("refused agent node-1"));
  // node-1's own agent (its certificate) gets its name back.
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
  // The stolen certificate still cannot have the name once its node is back.
  EXPECT_EQ(RegisterWithCertOf(c, "node-0", "node-1").error_code(), grpc::PERMISSION_DENIED);
}

TEST(TlsTest, PlaintextAgentsAndClientsAreRefused) {
  Cluster c({.nodes = 1});
  Process agent({TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "plain", "--data-dir",
                 c.dir() + "/plain", "--simulate-gpus", "2"},
                c.dir() + "/plain.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(agent.log()).find("cannot reach the server") != std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(agent.log());
  EXPECT_THAT(ReadFile(agent.log()), HasSubstr("needs --ca, --cert and --key"));
  EXPECT_EQ(NodeStates(c).count("plain"), 0u);
  agent.Stop();
  CommandResult r = c.Cli({"nodes"}, {"TRAINYARD_CA_FILE", "TRAINYARD_CONFIG=/dev/null"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("needs its CA: --ca, TRAINYARD_CA_FILE or caFile"));
}

// Session tickets cost a server a copy of the session and the peer's
// certificate decoded again at every handshake; no Trainyard client keeps a
// session to use them (src/cli/main_tls_defaults.cc). Counted as a client
// sees them, on the agents' door (with a node's certificate) and the clients'.
TEST(TlsTest, TheServerHandsOutNoSessionTickets) {
  Cluster c({.nodes = 0});
  EXPECT_EQ(TicketsFromServer(c.agent_address(), "node-0"), 0);
  EXPECT_EQ(TicketsFromServer(c.address(), ""), 0);
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

// Join tokens: an admin's token lets one node get its certificate once; the
// agent checks the server's CA against the pin before it sends the token.
TEST(TlsTest, AJoinTokenGetsItsNodeACertificateOnceBeforeItExpires) {
  Cluster c({.nodes = 1});
  CommandResult made = c.Cli({"token", "create", "--join", "node-9", "--ttl", "1h"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string token = made.out.substr(0, made.out.find('\n'));
  ASSERT_EQ(token.rfind("tyj_", 0), 0u) << made.out;
  size_t at = made.err.find("--ca-pin ");
  ASSERT_NE(at, std::string::npos) << made.err;
  std::string pin = made.err.substr(at + 9, made.err.find(' ', at + 9) - at - 9);
  EXPECT_EQ(pin.rfind("sha256:", 0), 0u) << made.err;
  auto agent_argv = [&](const std::string& data, const std::string& with_pin) {
    return std::vector<std::string>{TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "node-9",
                                    "--data-dir", data, "--simulate-gpus", "2", "--join-token", token,
                                    "--ca-pin", with_pin};
  };
  // A pin of another CA: the agent does not join (nor send the token).
  TempDir other;
  ASSERT_EQ(RunCli({"certs", "init", "--dir", other.path() + "/certs"}).exit_code, 0);
  std::string other_pin = security::CertPin(ReadFile(other.path() + "/certs/ca.crt"));
  CommandResult wrong = RunCommandLine(agent_argv(c.dir() + "/n9-wrong", other_pin), absl::Seconds(30));
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_THAT(wrong.err, HasSubstr("not joining"));
  // The right pin: the node joins and runs.
  Process agent(agent_argv(c.dir() + "/n9", pin), c.dir() + "/n9.log");
  ASSERT_TRUE(WaitUntil([&] { return NodeStates(c)["node-9"] == "READY"; }, absl::Seconds(30)))
      << ReadFile(agent.log()) << ReadFile(c.dir() + "/server.log");
  struct stat st {};
  ASSERT_EQ(stat((c.dir() + "/n9/tls/node.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  // Restarted, it uses the certificate it got (the token is spent).
  agent.Stop();
  Process again(agent_argv(c.dir() + "/n9", pin), c.dir() + "/n9-again.log");
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(again.log()).find("registered with") != std::string::npos; },
                      absl::Seconds(30)))
      << ReadFile(again.log());
  // Used once: another node dir with the same token is refused.
  CommandResult reused = RunCommandLine(agent_argv(c.dir() + "/n9-second", pin), absl::Seconds(30));
  EXPECT_EQ(reused.exit_code, 1) << reused.err;
  EXPECT_THAT(reused.err, HasSubstr("used already"));
  // An expired token is refused.
  // (valid for 1 ms: over before the agent starts)
  CommandResult brief = c.Cli({"token", "create", "--join", "node-8", "--ttl", "1ms"});
  ASSERT_EQ(brief.exit_code, 0) << brief.err;
  std::string expired_token = brief.out.substr(0, brief.out.find('\n'));
  std::vector<std::string> late = {TrainyardBin(), "agent", "--server", c.address(), "--agent-server", c.agent_address(), "--name", "node-8",
                                   "--data-dir", c.dir() + "/n8", "--simulate-gpus", "2", "--join-token",
                                   expired_token, "--ca-pin", pin};
  CommandResult expired = RunCommandLine(late, absl::Seconds(30));
  EXPECT_EQ(expired.exit_code, 1) << expired.err;
  EXPECT_THAT(expired.err, HasSubstr("expired"));
  EXPECT_EQ(NodeStates(c).count("node-8"), 0u);
  // Only an admin makes join tokens.
  std::string alice = c.UserToken("alice");
  CommandResult by_user = c.CliAs(alice, {"token", "create", "--join", "node-7"});
  EXPECT_NE(by_user.exit_code, 0);
  EXPECT_THAT(by_user.err, HasSubstr("only a cluster admin"));
  again.Stop();
}

}  // namespace
}  // namespace trainyard::testing
