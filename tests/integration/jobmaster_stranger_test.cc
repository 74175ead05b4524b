// A stranger at a real job's master (the master the server starts for the
// job): without the job's secret it cannot list, attach to or register as a
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

// `trainyard worker ARGS` as worker `id` of the master at `address`.
CommandResult AsWorker(const std::string& address, int id, std::vector<std::string> args) {
  setenv("TRAINYARD_JOB_MASTER", address.c_str(), 1);
  setenv("TRAINYARD_WORKER_ID", absl::StrCat(id).c_str(), 1);
  args.insert(args.begin(), "worker");
  CommandResult r = RunCli(args, absl::Seconds(20));
  unsetenv("TRAINYARD_JOB_MASTER");
  unsetenv("TRAINYARD_WORKER_ID");
  return r;
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
    CommandResult stranger = AsWorker(master, 0, verb);
    EXPECT_NE(stranger.exit_code, 0) << verb[0] << ": " << stranger.out;
    EXPECT_THAT(stranger.err, HasSubstr("without job " + job + "'s secret")) << verb[0];
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
