// The connection guard on real sockets: peers over their cap and over the
// total are closed at once, a closed connection frees its place, and a
// listener whose process ran out of descriptors keeps accepting.
#include "server/connection_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

class Listener {
 public:
  // Bound to 127.0.0.1, or to every address (INADDR_ANY).
  explicit Listener(uint32_t address = INADDR_LOOPBACK) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { close(fd_); }
  int fd() const { return fd_; }
  int port() const { return port_; }

  // A connection from `source` (an address of 127/8) to `to_address`,
  // connected (it sits in the listener's queue until accepted).
  int Connect(const std::string& source, const std::string& to_address = "127.0.0.1") {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    EXPECT_EQ(bind(c, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0) << source;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    inet_pton(AF_INET, to_address.c_str(), &to.sin_addr);
    to.sin_port = htons(port_);
    EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    return c;
  }

  // What the guard hands the server for what is queued now: the admitted
  // connections' peer addresses, in order (EAGAIN ends the list).
  std::vector<std::string> AcceptAll(std::vector<int>* fds) {
    std::vector<std::string> peers;
    for (;;) {
      sockaddr_in peer{};
      socklen_t len = sizeof(peer);
      int c = ConnectionGuard::Accept(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
      if (c < 0) {
        EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << strerror(errno);
        return peers;
      }
      char text[INET_ADDRSTRLEN];
      peers.push_back(inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text)));
      fds->push_back(c);
    }
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// True when the server side has closed the client's connection (EOF or a reset).
bool ClosedByServer(int client) {
  pollfd p{client, POLLIN, 0};
  if (poll(&p, 1, 2000) != 1) return false;
  char b;
  ssize_t n = recv(client, &b, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

TEST(ConnectionGuardTest, APeerOverItsCapIsClosedAtOnceAndOthersStillGetIn) {
  Listener l;
  ConnectionGuard::Install({l.port(), /*max_connections=*/10, /*max_connections_per_peer=*/2});
  ConnectionGuardStats before = ConnectionGuard::Stats();
  std::vector<int> clients = {l.Connect("127.0.0.2"), l.Connect("127.0.0.2"), l.Connect("127.0.0.2"),
                              l.Connect("127.0.0.3")};
  std::vector<int> server_side;
  EXPECT_EQ(l.AcceptAll(&server_side), (std::vector<std::string>{"127.0.0.2", "127.0.0.2", "127.0.0.3"}));
  EXPECT_TRUE(ClosedByServer(clients[2]));
  ConnectionGuardStats after = ConnectionGuard::Stats();
  EXPECT_EQ(after.open - before.open, 3);
  EXPECT_EQ(after.refused_peer_cap - before.refused_peer_cap, 1);

  // One of the peer's connections ends: its next one is admitted.
  close(server_side[0]);
  server_side.erase(server_side.begin());
  clients.push_back(l.Connect("127.0.0.2"));
  EXPECT_EQ(l.AcceptAll(&server_side), (std::vector<std::string>{"127.0.0.2"}));
  EXPECT_EQ(ConnectionGuard::Stats().open - before.open, 3);
  CloseAll(&server_side);
  CloseAll(&clients);
  EXPECT_EQ(ConnectionGuard::Stats().open, before.open);
  ConnectionGuard::UninstallForTest();
}

// Each address has a cap of its own: with a cap of one connection per peer,
// a thousand addresses get a thousand connections in. (Peers once shared
// 65,536 hashed counters: at this count two of them almost surely shared
// one, and the second was refused for the first's connection.)
TEST(ConnectionGuardTest, EveryPeerHasACapOfItsOwnHoweverManyPeersThereAre) {
  rlimit files;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 4096));
  setrlimit(RLIMIT_NOFILE, &files);
  getrlimit(RLIMIT_NOFILE, &files);
  const int peers = static_cast<int>(std::min<rlim_t>(1000, (files.rlim_cur - 100) / 2));
  ASSERT_GE(peers, 400) << "the descriptor limit leaves room for too few connections";
  Listener l;
  ConnectionGuard::Install({l.port(), /*max_connections=*/2 * peers, /*max_connections_per_peer=*/1});
  ConnectionGuardStats before = ConnectionGuard::Stats();
  std::vector<int> clients;
  std::vector<int> server_side;
  std::vector<std::string> admitted;
  for (int i = 0; i < peers;) {
    for (int batch = 0; batch < 32 && i < peers; ++batch, ++i) {  // within the listener's queue
      clients.push_back(l.Connect(absl::StrCat("127.0.", 1 + i / 250, ".", 1 + i % 250)));
    }
    std::vector<std::string> more = l.AcceptAll(&server_side);
    admitted.insert(admitted.end(), more.begin(), more.end());
  }
  EXPECT_EQ(static_cast<int>(admitted.size()), peers);
  ConnectionGuardStats after = ConnectionGuard::Stats();
  EXPECT_EQ(after.refused_peer_cap - before.refused_peer_cap, 0);
  EXPECT_EQ(after.open - before.open, peers);
  // A second connection from any of them is one too many.
  clients.push_back(l.Connect("127.0.1.1"));
  EXPECT_EQ(l.AcceptAll(&server_side).size(), 0u);
  EXPECT_TRUE(ClosedByServer(clients.back()));
  EXPECT_EQ(ConnectionGuard::Stats().refused_peer_cap - before.refused_peer_cap, 1);
  CloseAll(&server_side);
  CloseAll(&clients);
  EXPECT_EQ(ConnectionGuard::Stats().open, before.open);
  ConnectionGuard::UninstallForTest();
}

TEST(ConnectionGuardTest, OverTheTotalEveryPeerIsRefusedUntilOneCloses) {
  Listener l;
  ConnectionGuard::Install({l.port(), /*max_connections=*/3, /*max_connections_per_peer=*/3});
  ConnectionGuardStats before = ConnectionGuard::Stats();
  std::vector<int> clients = {l.Connect("127.0.0.2"), l.Connect("127.0.0.3"), l.Connect("127.0.0.4"),
                              l.Connect("127.0.0.5")};
  std::vector<int> server_side;
  EXPECT_EQ(l.AcceptAll(&server_side).size(), 3u);
  EXPECT_TRUE(ClosedByServer(clients[3]));
  EXPECT_EQ(ConnectionGuard::Stats().refused_total_cap - before.refused_total_cap, 1);
  close(server_side.back());
  server_side.pop_back();
  clients.push_back(l.Connect("127.0.0.5"));
  EXPECT_EQ(l.AcceptAll(&server_side), (std::vector<std::string>{"127.0.0.5"}));
  CloseAll(&server_side);
  CloseAll(&clients);
  ConnectionGuard::UninstallForTest();
}

TEST(ConnectionGuardTest, TheListenerKeepsAcceptingAfterDescriptorsRanOut) {
  Listener l;
  ConnectionGuard::Install({l.port(), /*max_connections=*/100, /*max_connections_per_peer=*/100});
  ConnectionGuardStats before = ConnectionGuard::Stats();
  int first = l.Connect("127.0.0.2");
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Every descriptor taken: the server side of `first` has none to get.
  std::vector<int> filler;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  std::vector<int> server_side;
  EXPECT_TRUE(l.AcceptAll(&server_side).empty());
  EXPECT_TRUE(ClosedByServer(first));
  EXPECT_EQ(ConnectionGuard::Stats().refused_no_fd - before.refused_no_fd, 1);

  // Descriptors free again: the next client gets in.
  close(filler.back());
  close(filler[filler.size() - 2]);
  filler.resize(filler.size() - 2);
  int second = l.Connect("127.0.0.2");
  EXPECT_EQ(l.AcceptAll(&server_side), (std::vector<std::string>{"127.0.0.2"}));
  CloseAll(&filler);
  CloseAll(&server_side);
  close(first);
  close(second);
  ConnectionGuard::UninstallForTest();
}

TEST(ConnectionGuardTest, AnotherListenersConnectionsAreNotCounted) {
  Listener guarded;
  Listener other;
  ConnectionGuard::Install({guarded.port(), /*max_connections=*/1, /*max_connections_per_peer=*/1});
  int64_t open_before = ConnectionGuard::Stats().open;
  std::vector<int> clients = {other.Connect("127.0.0.2"), other.Connect("127.0.0.2")};
  std::vector<int> server_side;
  EXPECT_EQ(other.AcceptAll(&server_side).size(), 2u);
  EXPECT_EQ(ConnectionGuard::Stats().open, open_before);
  CloseAll(&server_side);
  CloseAll(&clients);
  ConnectionGuard::UninstallForTest();
}

// gRPC's peer text for the server side of accepted connection `fd`.
std::string GrpcPeerOf(int fd) {
  sockaddr_in peer{};
  socklen_t len = sizeof(peer);
  getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len);
  char text[INET_ADDRSTRLEN];
  return std::string("ipv4:") + inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text)) + ":" +
         std::to_string(ntohs(peer.sin_port));
}

TEST(ConnectionGuardTest, SaysWhichAddressAPeerDialedUntilItIsMarkedAuthenticated) {
  Listener l;
  ConnectionGuard::Install({l.port(), /*max_connections=*/4, /*max_connections_per_peer=*/4});
  std::vector<int> clients = {l.Connect("127.0.0.2")};
  std::vector<int> server_side;
  ASSERT_EQ(l.AcceptAll(&server_side).size(), 1u);
  std::string peer = GrpcPeerOf(server_side[0]);
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kClients, peer), "127.0.0.1:" + std::to_string(l.port()));
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kAgents, peer), "") << "another door's peer";
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kClients, "ipv4:127.0.0.9:1"), "") << "an unknown peer";
  ConnectionGuard::MarkAuthenticated(Door::kClients, peer);
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kClients, peer), "");
  CloseAll(&server_side);
  CloseAll(&clients);
  ConnectionGuard::UninstallForTest();
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kClients, peer), "") << "no guard";
}

// A server bound to every address: each peer is told the address it dialed.
TEST(ConnectionGuardTest, AListenerOnEveryAddressTellsEachPeerTheAddressItDialed) {
  Listener l(INADDR_ANY);
  ConnectionGuard::Install({l.port(), /*max_connections=*/4, /*max_connections_per_peer=*/4, Door::kClients,
                            /*unauthenticated_grace_ms=*/0});
  std::vector<int> clients = {l.Connect("127.0.0.2", "127.0.0.3"), l.Connect("127.0.0.2", "127.0.0.4")};
  std::vector<int> server_side;
  ASSERT_EQ(l.AcceptAll(&server_side).size(), 2u);
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kClients, GrpcPeerOf(server_side[0])),
            "127.0.0.3:" + std::to_string(l.port()));
  EXPECT_EQ(ConnectionGuard::DialedAddressOf(Door::kClients, GrpcPeerOf(server_side[1])),
            "127.0.0.4:" + std::to_string(l.port()));
  CloseAll(&server_side);
  CloseAll(&clients);
  ConnectionGuard::UninstallForTest();
}

TEST(ConnectionGuardTest, AtTheCapTheOldestUnauthenticatedConnectionMakesRoomNeverAnAuthenticatedOne) {
  Listener l;
  ConnectionGuard::Install({l.port(), /*max_connections=*/2, /*max_connections_per_peer=*/2, Door::kClients,
                            /*unauthenticated_grace_ms=*/20});
  ConnectionGuardStats before = ConnectionGuard::Stats();
  std::vector<int> clients = {l.Connect("127.0.0.2"), l.Connect("127.0.0.3")};
  std::vector<int> server_side;
  ASSERT_EQ(l.AcceptAll(&server_side).size(), 2u);
  // The older one authenticates; the other never does.
  ConnectionGuard::MarkAuthenticated(Door::kClients, GrpcPeerOf(server_side[0]));
  // Both are past their grace once this sleep ends (a monotonic clock).
  usleep(50 * 1000);
  clients.push_back(l.Connect("127.0.0.4"));
  EXPECT_EQ(l.AcceptAll(&server_side), (std::vector<std::string>{"127.0.0.4"}));
  EXPECT_TRUE(ClosedByServer(clients[1])) << "the unauthenticated one made room";
  pollfd p{clients[0], POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 100), 0) << "the authenticated one stays";
  ConnectionGuardStats after = ConnectionGuard::Stats();
  EXPECT_EQ(after.evicted_unauthenticated - before.evicted_unauthenticated, 1);
  EXPECT_EQ(after.open - before.open, 2);
  // A newcomer within the grace of the last one is refused: nobody to shut down.
  ConnectionGuard::Install({l.port(), 2, 2, Door::kClients, /*unauthenticated_grace_ms=*/60000});
  clients.push_back(l.Connect("127.0.0.5"));
  EXPECT_TRUE(l.AcceptAll(&server_side).empty());
  EXPECT_TRUE(ClosedByServer(clients[3]));
  CloseAll(&server_side);
  CloseAll(&clients);
  EXPECT_EQ(ConnectionGuard::Stats().open, before.open);
  ConnectionGuard::UninstallForTest();
}

TEST(ConnectionGuardTest, TheAgentDoorHasCapsOfItsOwn) {
  Listener clients_port;
  Listener agents_port;
  ConnectionGuard::Install({clients_port.port(), 1, 1});
  ConnectionGuard::Install({agents_port.port(), 1, 1, Door::kAgents});
  std::vector<int> clients = {clients_port.Connect("127.0.0.2"), clients_port.Connect("127.0.0.3")};
  std::vector<int> server_side;
  EXPECT_EQ(clients_port.AcceptAll(&server_side).size(), 1u);  // the clients' door is full
  clients.push_back(agents_port.Connect("127.0.0.2"));
  EXPECT_EQ(agents_port.AcceptAll(&server_side), (std::vector<std::string>{"127.0.0.2"}));
  EXPECT_EQ(ConnectionGuard::Stats(Door::kAgents).open, 1);
  CloseAll(&server_side);
  CloseAll(&clients);
  EXPECT_EQ(ConnectionGuard::Stats(Door::kAgents).open, 0);
  ConnectionGuard::UninstallForTest();
}

TEST(ConnectionGuardTest, CapsLeaveHeadroomBelowTheDescriptorLimit) {
  ConnectionGuardOptions o = ConnectionCapsFor(20000, 0, 0);
  EXPECT_EQ(o.max_connections, 20000 - 2500);
  EXPECT_EQ(o.max_connections_per_peer, (20000 - 2500) / 8);
  o = ConnectionCapsFor(256, 0, 0);
  EXPECT_EQ(o.max_connections, 192);
  o = ConnectionCapsFor(20000, 500, 50);
  EXPECT_EQ(o.max_connections, 500);
  EXPECT_EQ(o.max_connections_per_peer, 50);
  o = ConnectionCapsFor(256, 5000, 5000);  // asked above what the limit allows
  EXPECT_EQ(o.max_connections, 192);
  EXPECT_EQ(o.max_connections_per_peer, 192);
}

}  // namespace
}  // namespace trainyard::server
