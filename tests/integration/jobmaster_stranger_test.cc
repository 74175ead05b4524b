// A stranger at a real job's master (the master the server starts for the
// job), another uid of the host (65534, through setpriv, where the test is
// root): without the job's secret it cannot list, attach to or register as a
// worker (it used to be able to report every worker COMPLETED); a worker of
// the job that asks for barrier generation 2^62, which used to make every
// later barrier of the job pass at once, is refused; and the master is not
// on another address of the host (it used to listen on 0.0.0.0). The job's
// workers pass their barriers one by one and succeed, while another uid
// holds more half-sent frames at the master than it keeps.
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kJobmasterStrangerWorkers = 2;
constexpr int kJobmasterStrangerBarriers = 3;

// Workers that wait for `out`/go, pass kJobmasterStrangerBarriers barriers by generation,
// noting each in their progress file, and report COMPLETED.
std::string JobmasterStrangerSpec(const std::string& out) {
  std::string bin = TrainyardBin();
  // Worker 1 first asks for a barrier far ahead (with the job's secret) and
  // keeps what it was told.
  std::string script = absl::StrCat(
      "if [ $TRAINYARD_INDEX = 1 ]; then ", bin, " worker barrier --generation 4611686018427387904 --timeout 10 2> ",
      out, "/ahead.err; echo $? > ", out, "/ahead.code; fi; ",
      "while [ ! -e ", out, "/go ]; do sleep 0.02; done; i=0; while [ $i -lt ", kJobmasterStrangerBarriers,
      " ]; do ", bin, " worker barrier --generation $i --timeout 40 || exit 1; ",
      "echo passed $i >> ", out, "/progress-$TRAINYARD_INDEX; i=$((i+1)); done; ", bin,
      " worker state COMPLETED");
  return absl::StrCat(R"(
name: jmstranger
replicas:
  worker:
    count: )", kJobmasterStrangerWorkers, R"(
    command: [sh, -c, ')", script, R"(']
)");
}

// The trainyard binary where uid 65534 can run it: a copy in a directory
// others may enter (the build tree may sit in a private one, as a fresh
// clone under `mktemp -d` does).
const std::string& StrangerBinary() {
  // Lives as long as the test program, and is removed as it exits (a copy
  // of the binary left behind per run filled /tmp by 25 MB each time).
  static TempDir dir;
  static const std::string path = [] {
    std::string bin = dir.path() + "/trainyard";
    std::error_code ec;
    std::filesystem::copy_file(TrainyardBin(), bin, std::filesystem::copy_options::overwrite_existing, ec);
    chmod(dir.path().c_str(), 0755);
    chmod(bin.c_str(), 0755);
    return ec ? std::string() : bin;
  }();
  return path;
}

// `trainyard worker ARGS` as worker `id` of the master at `address`, run as
// another uid of the host (65534, through setpriv) where this test is root;
// else as this uid (what is checked, the job's secret, is missing either
// way). `other_uid` says which.
CommandResult AsWorker(const std::string& address, int id, std::vector<std::string> args, bool* other_uid) {
  std::vector<std::string> argv = {TrainyardBin()};
  *other_uid = getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && !StrangerBinary().empty();
  if (*other_uid) {
    argv = {"/usr/bin/setpriv", "--reuid", absl::StrCat(kNobody), "--regid", absl::StrCat(kNobody),
            "--clear-groups", StrangerBinary()};
  }
  argv.push_back("worker");
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommandLine(argv, absl::Seconds(20),
                        {"TRAINYARD_JOB_MASTER=" + address, absl::StrCat("TRAINYARD_WORKER_ID=", id),
                         "TRAINYARD_JOB_SECRET", "TRAINYARD_CONFIG"});
}

// A child process, as uid 65534 when this test is root, that opens
// `connections` connections to the master at 127.0.0.1:`port` and sends on
// each half of a 1 MiB frame (the header and 512 KiB), then holds them until
// stopped by PID: more partial input than the master keeps (16 MiB), which
// once got it OOM-killed. The child makes system calls only.
class HalfFrameFlood {
 public:
  HalfFrameFlood(int port, int connections) {
    // Made before the fork: the child allocates nothing.
    std::string half = {0, 16, 0, 0};  // a frame of 1 MiB (big-endian length), then half of it
    half += std::string(512 * 1024, 'x');
    pid_ = fork();
    if (pid_ != 0) return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getuid() == 0) {
      setgroups(0, nullptr);
      if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) _exit(2);
    }
    for (int i = 0; i < connections; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      timeval limit{5, 0};  // a connection the master stopped reading is left as it is
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      to.sin_port = htons(static_cast<uint16_t>(port));
      if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) {
        ssize_t sent = send(fd, half.data(), half.size(), MSG_NOSIGNAL);
        (void)sent;  // cut off by the master is as good
      }
    }
    for (;;) pause();  // holding every connection
  }
  ~HalfFrameFlood() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

bool Connects(const std::string& ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

int Port(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  return port;
}

TEST(JobMasterStrangerTest, AStrangerWithoutTheSecretAndAFarAheadBarrierAreRefusedAndTheJobsBarriersStillWork) {
  Cluster c({.nodes = 1});  // the node's address is 127.0.0.1
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(JobmasterStrangerSpec(out));
  ASSERT_FALSE(job.empty());
  std::string master;
  ASSERT_TRUE(WaitUntil(
      [&] {
        master = c.Describe(job).value("job_master", "");
        return !master.empty() && Connects("127.0.0.1", Port(master));
      },
      absl::Seconds(30), absl::Milliseconds(50)))
      << c.Describe(job).dump(2);

  // Without the secret: no list, no attach, no STARTING, no COMPLETED.
  for (std::vector<std::string> verb : {std::vector<std::string>{"list"}, {"state", "COMPLETED"},
                                        {"barrier", "--timeout", "5"}}) {
    bool other_uid = false;
    CommandResult stranger = AsWorker(master, 0, verb, &other_uid);
    EXPECT_NE(stranger.exit_code, 0) << verb[0] << ": " << stranger.out;
    EXPECT_THAT(stranger.err, HasSubstr("without job " + job + "'s secret")) << verb[0] << ": " << stranger.err;
    if (getuid() == 0) {
      EXPECT_TRUE(other_uid) << "the stranger ran as root (no setpriv?)";
    }
  }
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out + "/ahead.code") == "1\n"; }, absl::Seconds(30)))
      << ReadFile(out + "/ahead.err");
  EXPECT_THAT(ReadFile(out + "/ahead.err"),
              HasSubstr("barrier generation 4611686018427387904 is ahead of job " + job +
                        ": it has passed 0 barrier(s), so the open barrier is generation 0"));
  // The master listens on the node's address only.
  int port = Port(master);
  EXPECT_TRUE(Connects("127.0.0.1", port));
  EXPECT_FALSE(Connects("127.0.0.2", port)) << "the master listens on every address";

  // While the workers pass their barriers, another uid holds 64 half-sent
  // 1 MiB frames at the master (32 MiB, twice what it keeps).
  HalfFrameFlood flood(port, 64);
  ASSERT_TRUE(flood.started());
  // The master holds what it keeps of them (its figures reach the server's
  // /metrics every 2 s): the barriers below are passed during the flood.
  std::string metrics;
  EXPECT_TRUE(WaitUntil([&] {
    metrics = HttpGet(c.http_address(), "/metrics").body;
    return MetricSample(metrics, "trainyard_jobmaster_connections").value_or(0) >= 16;
  }, absl::Seconds(30), absl::Milliseconds(200))) << metrics;
  WriteFile(out + "/go", "");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  for (const auto& t : c.Describe(job)["tasks"]) {
    EXPECT_EQ(t.value("restarts", 0), 0) << t.dump();  // the master was never killed nor restarted
  }
  for (int i = 0; i < kJobmasterStrangerWorkers; ++i) {
    EXPECT_EQ(ReadFile(absl::StrCat(out, "/progress-", i)), "passed 0\npassed 1\npassed 2\n")
        << "worker " << i;
  }
}

}  // namespace
}  // namespace trainyard::testing
