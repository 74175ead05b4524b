// The job master against a stranger on its port: a flood of half-sent big
// frames, a peer that never reads its answers, connections that never
// register, go silent or stop mid-frame. Each is cut off while the master's
// memory stays under its caps and its real workers keep being served.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/logging.h"
#include "common/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobmaster/frame.h"
#include "jobmaster/sim_fleet.h"
#include "jobmaster/test_master.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

// How long anything here may take on a loaded machine.
constexpr absl::Duration kPatience = absl::Seconds(30);
absl::Time JobmasterLimitsDeadline() { return absl::Now() + kPatience; }

JobMasterConfig JobmasterLimitsConfig(int workers) {
  JobMasterConfig c;
  c.job_name = "gpt";
  c.num_workers = workers;
  return c;
}

std::vector<int> Range(int n) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

// The 4-byte length header of a frame of `length` bytes.
std::string Header(uint32_t length) {
  return {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
          static_cast<char>(length >> 8), static_cast<char>(length)};
}

// A raw non-blocking connection to the master that sends what it is given
// and reads nothing unless asked.
class Stranger {
 public:
  // `receive_buffer` > 0 shrinks the socket's receive buffer (before the
  // connect, so the kernel does not grow it).
  explicit Stranger(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  ~Stranger() { close(fd_); }
  bool connected() const { return connected_; }
  void Queue(std::string_view bytes) { out_.append(bytes); }
  void Queue(const pb::JobMasterRequest& request) { AppendFrame(request, &out_); }
  // Sends what the socket takes now. False once everything went or the
  // master closed the connection.
  bool Push() {
    while (sent_ < out_.size() && !failed_) {
      ssize_t n = send(fd_, out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
      if (n > 0) {
        sent_ += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return true;
      } else if (!(n < 0 && errno == EINTR)) {
        failed_ = true;  // EPIPE, ECONNRESET: the master closed it
      }
    }
    return false;
  }
  // Reads and drops whatever the master sent until the end of the stream or
  // a reset; true when that came before `deadline`.
  bool SeesTheMasterClose(absl::Time deadline) {
    std::string buf(64 * 1024, '\0');
    while (absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, 50);  // waits on the socket, not for time to pass
      ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n == 0) return true;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string out_;
  size_t sent_ = 0;
  bool failed_ = false;
};

// Sends every stranger's bytes, round after round, until all went or failed.
void PushAll(std::vector<std::unique_ptr<Stranger>>& strangers) {
  absl::Time deadline = JobmasterLimitsDeadline();
  bool more = true;
  while (more && absl::Now() < deadline) {
    more = false;
    for (auto& s : strangers) more = s->Push() || more;
  }
}

pb::JobMasterRequest JobmasterLimitsBarrier(int64_t generation) {
  pb::JobMasterRequest r;
  r.mutable_barrier()->set_generation(generation);
  return r;
}

// The probe: 1,100 connections each send half of a 1 MiB frame and
// stop. Before the caps the master held all of it (1.1 GB) and was
// OOM-killed; now it holds at most max_buffered_input_bytes, cuts off the
// rest, keeps serving its workers, and closes the others when their partial
// frames time out.
TEST(JobMasterLimits, HalfSentBigFramesFromManyConnectionsStayUnderTheInputCap) {
  JobMasterConfig config = JobmasterLimitsConfig(4);  // defaults: 1 MiB frames, 16 MiB of partial frames
  SetLogLevel(LogLevel::kError);       // a warning for each of the 1,100 cut off
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  TestMaster master(config, &clock);
  ASSERT_TRUE(master.status().ok()) << master.status();
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(4, JobmasterLimitsDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(Range(4), JobmasterLimitsDeadline()).ok());
  constexpr int kFlood = 1100;
  std::string half = Header(1 << 20) + std::string(512 * 1024, 'x');
  std::vector<std::unique_ptr<Stranger>> flood;
  for (int i = 0; i < kFlood; ++i) {
    flood.push_back(std::make_unique<Stranger>(master.port()));
    ASSERT_TRUE(flood.back()->connected()) << i;
    flood.back()->Queue(half);
  }
  PushAll(flood);
  // Wait until the master read every one: each was cut off or holds its
  // whole half frame. At most 16 MiB / 512 KiB = 32 can be held.
  const JobMasterServer& server = master.server();
  auto held = [&] { return server.connection_count() - 4; };
  ASSERT_TRUE(WaitUntil([&] {
    return server.cut_off_count() + held() == kFlood &&
           server.buffered_input_bytes() >= static_cast<size_t>(held()) * (half.size() - 4);
  }, kPatience)) << server.cut_off_count() << " cut off, " << held() << " held";
  EXPECT_GE(server.cut_off_count(), kFlood - 32);
  EXPECT_LE(server.peak_buffered_input_bytes(), config.max_buffered_input_bytes);
  ASSERT_TRUE(fleet.BarrierAll(4, JobmasterLimitsDeadline()).ok()) << "the workers are served during the flood";
  // The frames that were kept are never completed: gone at the timeout.
  clock.Advance(config.partial_frame_timeout);
  ASSERT_TRUE(WaitUntil([&] { return server.connection_count() == 4; }, kPatience))
      << server.connection_count();
  EXPECT_EQ(server.cut_off_count(), kFlood);
  for (int i = 0; i < 4; ++i) fleet.Queue(i, JobmasterLimitsBarrier(1));
  ASSERT_TRUE(fleet.Exchange(4, JobmasterLimitsDeadline()).ok());
  EXPECT_EQ(fleet.Last(3).barrier().generation(), 1) << fleet.Last(3).DebugString();
}

// A peer that asks for the worker list again and again and never reads the
// answers is cut off once its queued answers pass the cap, instead of
// growing the master's memory without end.
TEST(JobMasterLimits, APeerThatNeverReadsIsCutOff) {
  JobMasterConfig config = JobmasterLimitsConfig(1000);
  config.max_queued_output_bytes = 256 * 1024;
  TestMaster master(config);
  ASSERT_TRUE(master.status().ok()) << master.status();
  SimFleet fleet("127.0.0.1", master.port());
  ASSERT_TRUE(fleet.Connect(1000, JobmasterLimitsDeadline()).ok());
  ASSERT_TRUE(fleet.RegisterAll(Range(1000), JobmasterLimitsDeadline()).ok());
  Stranger peer(master.port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(peer.connected());
  pb::JobMasterRequest attach;
  attach.mutable_attach()->set_worker_id(0);
  peer.Queue(attach);
  pb::JobMasterRequest list;
  list.mutable_list_workers()->set_mode(pb::IMMEDIATE);
  for (int i = 0; i < 5000; ++i) peer.Queue(list);  // ~30 KB of answer each: 150 MB
  absl::Time deadline = JobmasterLimitsDeadline();
  while (peer.Push() && absl::Now() < deadline) {
  }
  const JobMasterServer& server = master.server();
  ASSERT_TRUE(WaitUntil([&] { return server.cut_off_count() == 1; }, kPatience));
  EXPECT_TRUE(peer.SeesTheMasterClose(JobmasterLimitsDeadline()));
  // One list may wait beyond the cap, not more.
  EXPECT_LE(server.peak_queued_output_bytes(), config.max_queued_output_bytes + 64 * 1024);
  // The count is the loop's, read from this thread: the cut-off connection
  // leaves it once the loop has closed it.
  EXPECT_TRUE(WaitUntil([&] { return server.connection_count() == 1000; }, kPatience)) << server.connection_count();
  ASSERT_TRUE(fleet.BarrierAll(1000, JobmasterLimitsDeadline()).ok()) << "the real workers are still served";
}

// Time is a fake clock: each timeout passes exactly when the test says.
class Timeouts : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = JobmasterLimitsConfig(2);
    config_.partial_frame_timeout = absl::Seconds(5);
    config_.register_timeout = absl::Seconds(10);
    config_.idle_timeout = absl::Minutes(10);
    config_.barrier_timeout = absl::Hours(1);
    master_ = std::make_unique<TestMaster>(config_, &clock_);
    ASSERT_TRUE(master_->status().ok()) << master_->status();
    fleet_ = std::make_unique<SimFleet>("127.0.0.1", master_->port());
    ASSERT_TRUE(fleet_->Connect(4, JobmasterLimitsDeadline()).ok());
    ASSERT_TRUE(fleet_->RegisterAll({0, 1}, JobmasterLimitsDeadline()).ok());
    ASSERT_TRUE(WaitUntil([&] { return master_->server().connection_count() == 4; }, kPatience));
  }
  // Reads until connection `i` sees the master close it (or `wait` passes:
  // short where the test expects the connection to stay).
  bool ClosedByMaster(int i, absl::Duration wait = absl::Seconds(5)) {
    return fleet_->AwaitClosedByPeer(i, absl::Now() + wait);
  }

  JobMasterConfig config_;
  FakeClock clock_{absl::FromUnixSeconds(1700000000)};
  std::unique_ptr<TestMaster> master_;
  std::unique_ptr<SimFleet> fleet_;
};

TEST_F(Timeouts, AConnectionThatNeverRegistersIsClosed) {
  clock_.Advance(config_.register_timeout - absl::Seconds(1));
  EXPECT_FALSE(ClosedByMaster(2, absl::Milliseconds(200)));
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(ClosedByMaster(2));
  EXPECT_TRUE(ClosedByMaster(3));
  EXPECT_FALSE(fleet_->closed_by_peer(0)) << "registered workers stay";
  EXPECT_EQ(master_->server().cut_off_count(), 2);
}

TEST_F(Timeouts, AFrameBegunAndNotFinishedClosesItsConnection) {
  fleet_->QueueRaw(0, Header(100) + "only part of it");
  ASSERT_TRUE(fleet_->Exchange(0, JobmasterLimitsDeadline()).ok());
  ASSERT_TRUE(WaitUntil([&] { return master_->server().peak_buffered_input_bytes() > 0; }, kPatience));
  clock_.Advance(config_.partial_frame_timeout - absl::Seconds(1));
  EXPECT_FALSE(ClosedByMaster(0, absl::Milliseconds(200)));
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(ClosedByMaster(0));
  EXPECT_FALSE(fleet_->closed_by_peer(1));
}

TEST_F(Timeouts, AnIdleConnectionIsClosedUnlessItWaitsInABarrier) {
  fleet_->Queue(1, JobmasterLimitsBarrier(0));  // waits for worker 0, which never comes
  ASSERT_TRUE(fleet_->Exchange(0, JobmasterLimitsDeadline()).ok());
  ASSERT_TRUE(master_->WaitUntil([](const MasterState& s) { return s.barrier_waiting() == 1; }));
  clock_.Advance(config_.idle_timeout);
  EXPECT_TRUE(ClosedByMaster(0));
  EXPECT_FALSE(ClosedByMaster(1, absl::Milliseconds(200))) << "its barrier is still open (timeout 600 s)";
}

// With an address given (the server passes the node's), the master listens
// on that address only, not on every interface.
TEST(JobMasterBind, TheMasterListensOnTheAddressItIsGivenOnly) {
  JobMasterConfig config = JobmasterLimitsConfig(1);
  config.bind_address = "127.0.0.2";
  FakeJobTerminator terminator;
  RealClock clock;
  auto server = JobMasterServer::Create(config, &terminator, &clock);
  ASSERT_TRUE(server.ok()) << server.status();
  auto reachable = [&](const char* ip) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>((*server)->port()));
    inet_pton(AF_INET, ip, &addr.sin_addr);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return ok;
  };
  EXPECT_TRUE(reachable("127.0.0.2"));
  EXPECT_FALSE(reachable("127.0.0.1"));
  config.bind_address = "localhost";  // a host name is resolved
  EXPECT_TRUE(JobMasterServer::Create(config, &terminator, &clock).ok());
  config.bind_address = "no-such-host.invalid";
  auto bad = JobMasterServer::Create(config, &terminator, &clock);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("bind address 'no-such-host.invalid' is neither an IPv4 address nor a "
                        "host name with one (--bind)"));
}

}  // namespace
}  // namespace trainyard::jobmaster
