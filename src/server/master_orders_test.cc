// MasterOrders and AgentStreams::OrderCheckpoint against a stand-in master
// on a loopback port: the order arrives framed as the job master reads it,
// its MAC keyed by the job's credential; an unreachable or silent master is
// counted failed after the deadline and holds nothing else up.
#include "server/master_orders.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/order_mac.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"
#include "security/crypto.h"
#include "server/agent_streams.h"

namespace trainyard::server {
namespace {

// Listens on 127.0.0.1; each connection's first frame is kept, and answered
// with its order unless `silent`.
class StandInMaster {
 public:
  explicit StandInMaster(bool silent = false) : silent_(silent) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(listen(fd_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~StandInMaster() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::vector<v1::JobMasterRequest> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  static bool ReadN(int fd, char* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t r = read(fd, out + done, n - done);
      if (r <= 0) return false;
      done += static_cast<size_t>(r);
    }
    return true;
  }
  void Serve() {
    while (true) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char header[4];
      uint32_t n = 0;
      std::string body;
      if (ReadN(c, header, 4)) {
        std::memcpy(&n, header, 4);
        body.resize(ntohl(n));
        if (ReadN(c, body.data(), body.size())) {
          v1::JobMasterRequest req;
          req.ParseFromString(body);
          {
            absl::MutexLock lock(&mu_);
            received_.push_back(req);
          }
          if (!silent_) {
            v1::JobMasterResponse resp;
            resp.set_request_id(req.request_id());
            *resp.mutable_checkpoint() = req.server_order().order();
            std::string out = resp.SerializeAsString();
            uint32_t len = htonl(static_cast<uint32_t>(out.size()));
            std::string framed(reinterpret_cast<const char*>(&len), 4);
            framed += out;
            EXPECT_EQ(write(c, framed.data(), framed.size()), static_cast<ssize_t>(framed.size()));
          } else {
            char rest;
            (void)!read(c, &rest, 1);  // until the pusher gives up and closes
          }
        }
      }
      close(c);
    }
  }

  const bool silent_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<v1::JobMasterRequest> received_ ABSL_GUARDED_BY(mu_);
};

v1::CheckpointOrder Order(int64_t id) {
  v1::CheckpointOrder o;
  o.set_id(id);
  o.set_deadline_unix_ms(1'800'000'030'000);
  o.set_reason("preempted by job urgent (priority production)");
  return o;
}

TEST(MasterOrdersTest, TheBackendPushesTheOrderWithAMacUnderTheJobsCredential) {
  StandInMaster master;
  AgentStreams streams;
  streams.SetOrderKeys([](uint64_t id) { return absl::StrCat("job-token-", id); });
  streams.OrderCheckpoint(master.address(), 7, "bert", Order(1'800'000'000'123));
  ASSERT_TRUE(WaitUntil([&] { return !master.received().empty(); }, absl::Seconds(20)));
  v1::JobMasterRequest got = master.received()[0];
  ASSERT_TRUE(got.has_server_order());
  EXPECT_EQ(got.server_order().job(), "bert");
  EXPECT_EQ(got.server_order().order().id(), 1'800'000'000'123);
  const v1::CheckpointOrder& o = got.server_order().order();
  EXPECT_EQ(got.server_order().mac(),
            security::HmacSha256Hex("job-token-7", OrderMacText("bert", o.id(), o.deadline_unix_ms(), o.reason())));
}

TEST(MasterOrdersTest, WithoutJobCredentialsNothingIsPushed) {
  StandInMaster master;
  {
    AgentStreams streams;  // a server run with --no-auth: masters hold no token
    streams.OrderCheckpoint(master.address(), 7, "bert", Order(5));
  }  // its pusher is stopped and joined here
  EXPECT_TRUE(master.received().empty());
}

TEST(MasterOrdersTest, DeliveredOrdersAreCountedAndAnUnreachableOrSilentMasterFailsWithinTheDeadline) {
  // A deadline a loaded machine's answering master meets with room to spare;
  // the silent one costs it once.
  MasterOrders orders(absl::Seconds(3));
  StandInMaster answering;
  StandInMaster silent(/*silent=*/true);
  // A port nobody listens on: a listener closed at once.
  std::string closed;
  {
    StandInMaster gone;
    closed = gone.address();
  }
  v1::ServerOrder o;
  o.set_job("bert");
  *o.mutable_order() = Order(9);
  orders.Push(silent.address(), o);
  orders.Push(closed, o);
  orders.Push(answering.address(), o);
  ASSERT_TRUE(WaitUntil([&] { return orders.delivered() + orders.failed() == 3; }, absl::Seconds(20)));
  EXPECT_EQ(orders.delivered(), 1u);
  EXPECT_EQ(orders.failed(), 2u);
  EXPECT_EQ(silent.received().size(), 1u) << "it got the order but never answered";
}

}  // namespace
}  // namespace trainyard::server
