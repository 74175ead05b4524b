// A stranger at a real job's master (the master the server starts for the
// job), another uid of the host (65534, through setpriv, where the test is
// root): without the job's secret it cannot list, attach to or register as a
// worker (it used to be able to report every worker COMPLETED); a worker of
// the job that asks for barrier generation 2^62, which used to make every
// later barrier of the job pass at once, is refused; and the master is not
// on another address of the host (it used to listen on 0.0.0.0). The job's
// workers pass their barriers one by one and succeed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kWorkers = 2;
constexpr int kBarriers = 3;

// Workers that wait for `out`/go, pass kBarriers barriers by generation,
// noting each in their progress file, and report COMPLETED.
std::string Spec(const std::string& out) {
  std::string bin = TrainyardBin();
  // Worker 1 first asks for a barrier far ahead (with the job's secret) and
  // keeps what it was told.
  std::string script = absl::StrCat(
      "if [ $TRAINYARD_INDEX = 1 ]; then ", bin, " worker barrier --generation 4611686018427387904 --timeout 10 2> ",
      out, "/ahead.err; echo $? > ", out, "/ahead.code; fi; ",
      "while [ ! -e ", out, "/go ]; do sleep 0.02; done; i=0; while [ $i -lt ", kBarriers,
      " ]; do ", bin, " worker barrier --generation $i --timeout 40 || exit 1; ",
      "echo passed $i >> ", out, "/progress-$TRAINYARD_INDEX; i=$((i+1)); done; ", bin,
      " worker state COMPLETED");
  return absl::StrCat(R"(
name: jmstranger
replicas:
  worker:
    count: )", kWorkers, R"(
    command: [sh, -c, ')", script, R"(']
)");
}

constexpr int kNobody = 65534;

// The trainyard binary where uid 65534 can run it: a copy in a directory
// others may enter (the build tree may sit in a private one, as a fresh
// clone under `mktemp -d` does).
const std::string& StrangerBinary() {
  static TempDir* dir = new TempDir();  // lives as long as the test program
  static const std::string path = [] {
    std::string bin = dir->path() + "/trainyard";
    std::error_code ec;
    std::filesystem::copy_file(TrainyardBin(), bin, std::filesystem::copy_options::overwrite_existing, ec);
    chmod(dir->path().c_str(), 0755);
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
  std::string job = c.Submit(Spec(out));
  ASSERT_FALSE(job.empty());
  std::string master;
  ASSERT_TRUE(WaitFor(
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
  ASSERT_TRUE(WaitFor([&] { return ReadFile(out + "/ahead.code") == "1\n"; }, absl::Seconds(30)))
      << ReadFile(out + "/ahead.err");
  EXPECT_THAT(ReadFile(out + "/ahead.err"),
              HasSubstr("barrier generation 4611686018427387904 is ahead of job " + job +
                        ": it has passed 0 barrier(s), so the open barrier is generation 0"));
  // The master listens on the node's address only.
  int port = Port(master);
  EXPECT_TRUE(Connects("127.0.0.1", port));
  EXPECT_FALSE(Connects("127.0.0.2", port)) << "the master listens on every address";

  WriteFile(out + "/go", "");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  for (int i = 0; i < kWorkers; ++i) {
    EXPECT_EQ(ReadFile(absl::StrCat(out, "/progress-", i)), "passed 0\npassed 1\npassed 2\n")
        << "worker " << i;
  }
}

}  // namespace
}  // namespace trainyard::testing
