// A connection flood against a real server, from other loopback addresses
// (127.0.0.2 and up) than the CLI and the agents use (127.0.0.1), opened by
// another uid of the host (65534) where the test is root: the server
// keeps its caps, keeps serving the CLI and the agents' heartbeats, never
// runs out of descriptors, and lets a new client in once the flood is gone.
// A flood that fills the client port from sixteen addresses takes no
// agent's place (agents have a listener of their own) and no authenticated
// user's (a connection that never authenticated is shut down first).
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// One byte with room for one descriptor: what SendFd and ReceiveFd pass
// (SCM_RIGHTS). Not copied (it points into itself); no allocation, as
// SendFd runs in a forked child.
struct FdMessage {
  FdMessage() {
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  char byte = 0;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
};

// Sends `fd` over the Unix socket `to`.
bool SendFd(int to, int fd) {
  FdMessage msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg.m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(to, &msg.m, MSG_NOSIGNAL) == 1;
}

// The descriptor SendFd sent over `from`; -1 when none came.
int ReceiveFd(int from) {
  FdMessage msg;
  if (recvmsg(from, &msg.m, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg.m);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

// `count` TCP connections from `source` to the server's gRPC port, each
// connected (or refused) within the deadline; they send nothing. Made by a
// child process as uid 65534 when this test is root (a stranger of the
// host), and handed back here (SCM_RIGHTS) so that the test can see which
// the server keeps.
std::vector<int> Flood(const std::string& server, const std::string& source, int count) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(server.substr(server.rfind(':') + 1), &port)) << server;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, source.c_str(), &from.sin_addr), 1) << source;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(port);
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {  // system calls only from here
    close(pair[0]);
    if (getuid() == 0) {
      setgroups(0, nullptr);
      if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) _exit(2);
    }
    for (int i = 0; i < count; ++i) {
      int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c < 0 || bind(c, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) _exit(3);
      connect(c, reinterpret_cast<const sockaddr*>(&to), sizeof(to));  // completes in the background
      if (!SendFd(pair[1], c)) _exit(4);
      close(c);
    }
    _exit(0);
  }
  close(pair[1]);
  std::vector<int> fds;
  for (int i = 0; i < count && pid > 0; ++i) {
    int fd = ReceiveFd(pair[0]);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  close(pair[0]);
  int status = -1;
  if (pid > 0) waitpid(pid, &status, 0);
  EXPECT_EQ(status, 0) << "the flooding child failed";
  EXPECT_EQ(static_cast<int>(fds.size()), count);
  return fds;
}

// How many of `fds` the server still holds open (connected, not closed by
// the server), once every one of them was either admitted or closed.
int StillOpen(const std::vector<int>& fds) {
  int open = 0;
  for (int fd : fds) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    poll(&p, 1, 0);
    bool closed = (p.revents & (POLLHUP | POLLERR)) != 0;
    if (!closed && (p.revents & POLLIN) != 0) {
      char b;
      closed = recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) <= 0;
    }
    if (!closed && (p.revents & POLLOUT) != 0) ++open;
  }
  return open;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

constexpr char kSteadyJob[] = R"(
name: steady
replicas:
  worker:
    count: 2
    resources: {gpus: 8, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)";

constexpr char kOneTaskJob[] = R"(
name: single
replicas:
  worker:
    count: 1
    resources: {gpus: 1, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)";

TEST(ConnectionFloodTest, AFloodFromOneAddressLeavesRoomForTheCliAndTheAgents) {
  // Connections that never authenticate stay (no newcomer may shut them
  // down): this test is about the caps alone.
  Cluster c({.nodes = 2, .node_timeout_ms = 2000, .heartbeat_interval_ms = 200,
             .server_flags = {"--max-open-files", "1024", "--max-connections-per-peer", "100",
                              "--unauthenticated-grace-ms", "0"}});
  std::string job = c.Submit(kSteadyJob);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));

  std::vector<int> flood = Flood(c.address(), "127.0.0.2", 1500);
  // The server keeps 100 of them and closes the rest as it accepts them.
  EXPECT_TRUE(WaitUntil([&] { return ServerMetric(c, "trainyard_grpc_connections_refused_total{reason=\"peer_cap\"}") >= 1400; },
                      absl::Seconds(30)))
      << "refused: " << ServerMetric(c, "trainyard_grpc_connections_refused_total{reason=\"peer_cap\"}");
  EXPECT_EQ(StillOpen(flood), 100);

  // Meanwhile the CLI gets in, and for three node timeouts the agents'
  // heartbeats keep their nodes READY and the job untouched.
  CommandResult nodes = c.Cli({"nodes"});
  EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
  std::string changed;
  for (absl::Time until = absl::Now() + absl::Seconds(6); changed.empty() && absl::Now() < until;) {
    for (const auto& n : c.Nodes().value("nodes", nlohmann::json::array())) {
      if (n["info"].value("state", "") != "READY") changed = n.dump();
    }
    if (std::string state = c.JobState(job); state != "RUNNING") changed = "job " + state;
  }
  EXPECT_EQ(changed, "") << "a node or the job changed under the flood";
  for (const auto& t : c.Describe(job).value("tasks", nlohmann::json::array())) {
    EXPECT_EQ(t.value("restarts", 0), 0) << t.dump();
  }
  CloseAll(&flood);
  EXPECT_TRUE(c.server().Running());
  EXPECT_THAT(ReadFile(c.server().log()), Not(HasSubstr("Too many open files")));
  EXPECT_THAT(ReadFile(c.server().log()), HasSubstr("refusing connections at the client port: a peer reached its cap"));
}

TEST(ConnectionFloodTest, AtTheTotalCapNewClientsWaitOutsideAndGetInOnceTheFloodIsGone) {
  Cluster c({.nodes = 1, .server_flags = {"--max-open-files", "512", "--max-connections", "300",
                                          "--max-connections-per-peer", "100", "--unauthenticated-grace-ms", "0"}});
  std::string job = c.Submit(kOneTaskJob);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  std::vector<int> flood;
  for (int host = 2; host <= 6; ++host) {
    std::vector<int> more = Flood(c.address(), absl::StrCat("127.0.0.", host), 150);
    flood.insert(flood.end(), more.begin(), more.end());
  }
  // 300 held in all: the flood's and the job master's (the agent has a
  // listener of its own).
  EXPECT_TRUE(WaitUntil(
      [&] { return ServerMetric(c, "trainyard_grpc_connections_open") == 300 && StillOpen(flood) >= 290; },
      absl::Seconds(30)))
      << "open: " << ServerMetric(c, "trainyard_grpc_connections_open") << ", flood held: " << StillOpen(flood);
  EXPECT_GE(ServerMetric(c, "trainyard_grpc_connections_refused_total{reason=\"total_cap\"}"), 1);
  CommandResult refused = c.Cli({"nodes"});
  EXPECT_NE(refused.exit_code, 0) << "a client got in past maxConnections";

  CloseAll(&flood);
  CommandResult after = c.Cli({"nodes"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_THAT(after.out, HasSubstr("node-0"));
  EXPECT_EQ(c.JobState(job), "RUNNING");
  EXPECT_THAT(ReadFile(c.server().log()), Not(HasSubstr("Too many open files")));
}

// 960 connections opened to the client port: from sixteen addresses
// (127.0.0.2..17), 60 each, where the per-peer cap is 25 and the total 400
// (16 x 25: the flood fills it), held (they send nothing, and the handshake
// timeout is five minutes). Before
// agents had a listener of their own, a restarted agent could not get back
// in and its node was lost; before unauthenticated connections went first,
// no user could get in until the flood went away.
TEST(ConnectionFloodTest, AFloodFromSixteenAddressesTakesNoAgentsPlaceAndNoAuthenticatedUsers) {
  // This process holds the flood's client ends.
  rlimit files;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 4096));
  setrlimit(RLIMIT_NOFILE, &files);
  TempDir config_dir;
  std::string config = config_dir.path() + "/server.yaml";
  WriteFile(config, "handshakeTimeoutMs: 300000\n");
  Cluster c({.nodes = 2, .node_timeout_ms = 10000, .heartbeat_interval_ms = 200,
             .server_flags = {"--config", config, "--max-open-files", "1024", "--max-connections", "400",
                              "--max-connections-per-peer", "25", "--unauthenticated-grace-ms", "1000"},
             .agents_kill_tasks_on_exit = false});
  std::string alice = c.UserToken("alice");
  ASSERT_FALSE(alice.empty());
  std::string job = c.Submit(kOneTaskJob);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  int busy = 0;
  for (const auto& t : c.Describe(job).value("tasks", nlohmann::json::array())) {
    if (t.value("role", "") == "worker" && t.value("node", "") == "node-1") busy = 1;
  }

  std::vector<int> flood;
  for (int host = 2; host <= 17; ++host) {
    std::vector<int> more = Flood(c.address(), absl::StrCat("127.0.0.", host), 60);
    flood.insert(flood.end(), more.begin(), more.end());
  }
  EXPECT_TRUE(WaitUntil([&] { return ServerMetric(c, "trainyard_grpc_connections_open") >= 399; }, absl::Seconds(30)))
      << "open: " << ServerMetric(c, "trainyard_grpc_connections_open");

  // The agent of the job's node dies and comes back while the flood holds
  // the client port: it registers again at its own listener, its task is
  // still its own, and its node is never lost.
  size_t log_before = ReadFile(c.agent(busy).log()).size();
  c.agent(busy).Kill();
  c.RestartAgent(busy);
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(c.agent(busy).log()).find("registered with", log_before) != std::string::npos; },
                      absl::Seconds(60)))
      << ReadFile(c.agent(busy).log());
  // A user with a token gets in: a connection of the flood makes room.
  CommandResult jobs;
  EXPECT_TRUE(WaitUntil([&] { return (jobs = c.CliAs(alice, {"jobs"})).exit_code == 0; }, absl::Seconds(60),
                      absl::Milliseconds(200)))
      << jobs.err;
  EXPECT_THAT(jobs.out, HasSubstr("single"));
  EXPECT_GE(ServerMetric(c, "trainyard_grpc_connections_evicted_total{listener=\"clients\"}"), 1);
  EXPECT_TRUE(c.WaitNodesReady(2, absl::Seconds(60)));
  EXPECT_EQ(c.JobState(job), "RUNNING");
  for (const auto& t : c.Describe(job).value("tasks", nlohmann::json::array())) {
    EXPECT_EQ(t.value("restarts", 0), 0) << t.dump();
  }
  CloseAll(&flood);
  EXPECT_THAT(ReadFile(c.server().log()), Not(HasSubstr(" lost: no heartbeat")));
  EXPECT_TRUE(c.server().Running());
}

}  // namespace
}  // namespace trainyard::testing
