// A stranger at a real job's master (the master the server starts for the
// job): it asks for barrier generation 2^62, which used to make every later
// barrier of the job pass at once, and tries the master on another address
// of the host, which it used to listen on (0.0.0.0). The master refuses the
// first with a clear error, is not there for the second, and the job's
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
  std::string script = absl::StrCat(
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

TEST(JobMasterStrangerTest, AFarAheadBarrierGenerationIsRefusedAndTheJobsBarriersStillWork) {
  Cluster c({.nodes = 1});  // the node's address is 127.0.0.1
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(Spec(out));
  ASSERT_FALSE(job.empty());
  std::string master;
  ASSERT_TRUE(WaitFor(
      [&] {
        master = c.Describe(job).value("job_master", "");
        return !master.empty() && AsWorker(master, 1, {"list"}).exit_code == 0;
      },
      absl::Seconds(30), absl::Milliseconds(50)))
      << c.Describe(job).dump(2);

  CommandResult ahead = AsWorker(master, 1, {"barrier", "--generation", "4611686018427387904",
                                             "--timeout", "10"});
  EXPECT_EQ(ahead.exit_code, 1) << ahead.out << ahead.err;
  EXPECT_THAT(ahead.err, HasSubstr("barrier generation 4611686018427387904 is ahead of job " +
                                   job + ": it has passed 0 barrier(s), so the open barrier "
                                   "is generation 0"));
  // The master listens on the node's address only.
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(master.substr(master.rfind(':') + 1), &port)) << master;
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
