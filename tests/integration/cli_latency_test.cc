// The CLI against a server some way off: a TLS cluster reached through a
// proxy that holds every chunk 40 ms in each direction (a server about
// 80 ms of round trip away, as across regions). The CLI once gave each
// connection attempt only 100 ms (gRPC reads GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
// as the connect timeout), so a TLS handshake that far away never finished.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// A TCP proxy on a free loopback port to `target_port`: each chunk read from
// one side is written to the other `delay` after it was read.
class DelayProxy {
 public:
  DelayProxy(int target_port, absl::Duration delay) : target_port_(target_port), delay_(delay) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~DelayProxy() {
    shutdown(listener_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    close(listener_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : pipes_) t.join();
    for (int fd : fds_) close(fd);
  }
  // 0 when the proxy could not listen.
  int port() const { return port_; }

 private:
  void Accept() {
    for (;;) {
      int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return;  // shut down
      int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      to.sin_port = htons(static_cast<uint16_t>(target_port_));
      std::lock_guard<std::mutex> lock(mu_);
      fds_.insert(fds_.end(), {client, server});
      if (connect(server, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
        shutdown(client, SHUT_RDWR);
        continue;
      }
      pipes_.emplace_back([this, client, server] { Pipe(client, server); });
      pipes_.emplace_back([this, client, server] { Pipe(server, client); });
    }
  }

  void Pipe(int from, int to) {
    char buf[65536];
    for (;;) {
      ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      absl::SleepFor(delay_);  // the link's latency, not a wait for anything
      // MSG_NOSIGNAL: a side that went away is an end, not a SIGPIPE.
      if (send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    shutdown(to, SHUT_WR);
  }

  const int target_port_;
  const absl::Duration delay_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> pipes_;
};

TEST(CliLatencyTest, TheCliReachesATlsServerEightyMillisecondsAway) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(c.address().substr(c.address().rfind(':') + 1), &port)) << c.address();
  DelayProxy far(port, absl::Milliseconds(40));
  ASSERT_GT(far.port(), 0);

  // The server's certificate names 127.0.0.1, the proxy's address too.
  std::vector<std::string> server = {"--server", absl::StrCat("127.0.0.1:", far.port())};
  CommandResult nodes = RunCli({"nodes", server[0], server[1]});
  EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_THAT(nodes.out, HasSubstr("node-0"));
  CommandResult jobs = RunCli({"jobs", server[0], server[1]});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
}

}  // namespace
}  // namespace trainyard::testing
