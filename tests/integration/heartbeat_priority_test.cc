// Heartbeats keep their priority under a client flood (issue 13): a real
// cluster with security on (TLS, node certificates, tokens) while, for four
// node timeouts, clients hammer the server's gRPC port the ways a busy or
// hostile cluster does: authenticated dashboards and scripts keeping many
// ListJobs / DescribeJob / ListNodes calls in flight on a few connections,
// callers with no token or a made-up one (refused UNAUTHENTICATED), and
// another uid (65534, where the test runs as root) opening connections from
// 127.0.0.2 that send garbage instead of a TLS handshake. Throughout, both
// nodes stay READY and are never lost, their heartbeats stay fresh, the job
// keeps RUNNING without a restart, and the CLI works once the flood is gone.
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "tests/integration/grpc_client.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Clients that keep `calls_per_channel` unary calls in flight on each of
// `channels` connections (TLS, verified with the cluster CA) until Stop:
// ListJobs, DescribeJob of `job` and ListNodes in turn, each sent with
// `authorization` ("" = no token).
class RpcFlood {
 public:
  struct Options {
    int channels = 4;
    int calls_per_channel = 32;
    std::string authorization;
  };

  RpcFlood(const std::string& address, std::string job, Options options)
      : job_(std::move(job)), options_(std::move(options)) {
    for (int i = 0; i < options_.channels; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("trainyard.test.flood_channel", i);  // its own connection
      stubs_.push_back(v1::Trainyard::NewStub(grpc::CreateCustomChannel(address, ClientCredentials(), args)));
    }
    for (int i = 0; i < options_.channels; ++i) {
      for (int k = 0; k < options_.calls_per_channel; ++k) Next(stubs_[i].get(), k % 3);
    }
  }
  ~RpcFlood() { Stop(); }

  // No new calls; waits for those in flight.
  void Stop() {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.wait(lock, [this] { return in_flight_ == 0; });
  }
  int64_t ok() const { return ok_; }
  int64_t unauthenticated() const { return unauthenticated_; }
  int64_t other_errors() const { return other_errors_; }
  std::string first_other_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_other_error_;
  }

 private:
  struct Call {
    grpc::ClientContext ctx;
    v1::ListJobsRequest list_jobs;
    v1::ListJobsResponse jobs;
    v1::DescribeJobRequest describe;
    v1::JobView view;
    v1::ListNodesRequest list_nodes;
    v1::ListNodesResponse nodes;
  };

  void Next(v1::Trainyard::Stub* stub, int kind) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      ++in_flight_;
    }
    auto* call = new Call;
    if (!options_.authorization.empty()) call->ctx.AddMetadata("authorization", options_.authorization);
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto done = [this, stub, kind, call](grpc::Status st) {
      delete call;
      Count(st);
      Next(stub, (kind + 1) % 3);
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      cv_.notify_all();
    };
    switch (kind) {
      case 0:
        stub->async()->ListJobs(&call->ctx, &call->list_jobs, &call->jobs, done);
        break;
      case 1:
        call->describe.set_job(job_);
        stub->async()->DescribeJob(&call->ctx, &call->describe, &call->view, done);
        break;
      default:
        stub->async()->ListNodes(&call->ctx, &call->list_nodes, &call->nodes, done);
    }
  }

  void Count(const grpc::Status& st) {
    if (st.ok()) {
      ++ok_;
    } else if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      ++unauthenticated_;
    } else {
      ++other_errors_;
      std::lock_guard<std::mutex> lock(mu_);
      if (first_other_error_.empty()) first_other_error_ = st.error_message();
    }
  }

  const std::string job_;
  const Options options_;
  std::vector<std::unique_ptr<v1::Trainyard::Stub>> stubs_;
  std::atomic<int64_t> ok_{0}, unauthenticated_{0}, other_errors_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  bool stopping_ = false;
  std::string first_other_error_;
};

// A child process, as uid 65534 when this test runs as root, that opens a
// connection from 127.0.0.2 to `port`, sends bytes that are no TLS
// handshake, and closes it, `per_second` times a second until stopped by
// PID. The child makes system calls only (this process has gRPC's threads).
class GarbageConnections {
 public:
  GarbageConnections(int port, int per_second) {
    void* shared = mmap(nullptr, sizeof(std::atomic<int64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return;
    connected_ = new (shared) std::atomic<int64_t>(0);
    pid_ = fork();
    if (pid_ == 0) Run(port, per_second, connected_);
  }
  ~GarbageConnections() {
    Stop();
    if (connected_ != nullptr) munmap(connected_, sizeof(*connected_));
  }
  bool started() const { return pid_ > 0; }
  // Connections the server's listener took (connect succeeded).
  int64_t connected() const { return connected_ == nullptr ? 0 : connected_->load(); }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  [[noreturn]] static void Run(int port, int per_second, std::atomic<int64_t>* connected);
  pid_t pid_ = -1;
  std::atomic<int64_t>* connected_ = nullptr;
};

void GarbageConnections::Run(int port, int per_second, std::atomic<int64_t>* connected) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getuid() == 0) {
    setgroups(0, nullptr);
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) _exit(2);
  }
  static const char kGarbage[] = "GET / HTTP/1.1\r\nHost: trainyard\r\n\r\n";
  timespec pace{0, 1000000000L / per_second};
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.2", &from.sin_addr);
    bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) {
      connected->fetch_add(1);
      ssize_t sent = send(fd, kGarbage, sizeof(kGarbage) - 1, MSG_NOSIGNAL);
      (void)sent;  // a connection the server already closed is as good
    }
    close(fd);
    nanosleep(&pace, nullptr);  // the flood's rate, not a wait for anything
  }
}

// utime + stime of process `pid` in seconds (its /proc stat), for the log.
double CpuSeconds(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  std::vector<std::string> fields = absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) || !absl::SimpleAtod(fields[12], &stime)) return 0;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

constexpr char kHeartbeatPrioritySteadyJob[] = R"(
name: steady
replicas:
  worker:
    count: 2
    resources: {gpus: 8, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)";

TEST(HeartbeatPriorityTest, NodesStayReadyAndTheJobRunsUnderAClientFlood) {
  constexpr int kNodeTimeoutMs = 2000;
  Cluster c({.nodes = 2, .node_timeout_ms = kNodeTimeoutMs, .heartbeat_interval_ms = 200});
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(kHeartbeatPrioritySteadyJob);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING"));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(c.address().substr(c.address().rfind(':') + 1), &port)) << c.address();

  // Four node timeouts of flood: 192 calls in flight on 10 connections, a
  // third of them refused for their token, and 200 garbage connections a
  // second from another uid and address.
  double cpu0 = CpuSeconds(c.server().pid());
  absl::Time t0 = absl::Now();
  GarbageConnections garbage(port, 200);
  ASSERT_TRUE(garbage.started());
  RpcFlood admin(c.address(), job, {.channels = 8, .calls_per_channel = 16, .authorization = AdminAuthorization()});
  RpcFlood no_token(c.address(), job, {.channels = 1, .calls_per_channel = 32});
  RpcFlood made_up(c.address(), job,
                   {.channels = 1, .calls_per_channel = 32, .authorization = "Bearer ty_00000000000000000000"});
  double max_age = 0;
  std::string changed;
  absl::Time until = absl::Now() + absl::Milliseconds(4 * kNodeTimeoutMs);
  while (absl::Now() < until && changed.empty()) {
    max_age = std::max(max_age, ServerMetric(c, "trainyard_agent_heartbeat_age_max_seconds"));
    double ready = ServerMetric(c, "trainyard_nodes{state=\"READY\"}");
    if (ready != 2) changed = absl::StrCat("READY nodes: ", ready);
    absl::SleepFor(absl::Milliseconds(100));  // the sampling interval, not a wait for a condition
  }
  admin.Stop();
  no_token.Stop();
  made_up.Stop();
  garbage.Stop();
  double server_cores = (CpuSeconds(c.server().pid()) - cpu0) / absl::ToDoubleSeconds(absl::Now() - t0);

  // What a user sees: both nodes stayed READY throughout and none was lost.
  // The oldest heartbeat's age is printed, not asserted: it is a latency,
  // which the machine's other load moves (1.2-1.4 s alone on the 2-core VM,
  // 4.4 s once with another test beside it, the nodes READY all along).
  EXPECT_EQ(changed, "") << "a node changed under the flood";
  EXPECT_THAT(ReadFile(c.server().log()), Not(HasSubstr(" lost: no heartbeat")));
  // The flood was served, not stalled: each kind of call got its answers.
  EXPECT_GT(admin.ok(), 1000) << admin.first_other_error();
  EXPECT_EQ(admin.other_errors(), 0) << admin.first_other_error();
  EXPECT_GT(no_token.unauthenticated(), 1000);
  EXPECT_GT(made_up.unauthenticated(), 1000);
  EXPECT_GT(garbage.connected(), 500);
  std::cerr << "flood: " << admin.ok() << " calls answered, " << no_token.unauthenticated() + made_up.unauthenticated()
            << " refused for their token, " << garbage.connected() << " garbage connections accepted; oldest heartbeat "
            << max_age << " s; server CPU " << server_cores << " cores\n";

  EXPECT_EQ(c.JobState(job), "RUNNING");
  for (const auto& t : c.Describe(job).value("tasks", nlohmann::json::array())) {
    EXPECT_EQ(t.value("restarts", 0), 0) << t.dump();
  }
  CommandResult nodes = c.Cli({"nodes"});
  EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_THAT(nodes.out, HasSubstr("node-0"));
  EXPECT_THAT(nodes.out, HasSubstr("node-1"));
  EXPECT_THAT(nodes.out, Not(HasSubstr("LOST")));
}

}  // namespace
}  // namespace trainyard::testing
