// Framework shapes on a real cluster, as their users write them: an MPI job
// of a launcher and workers that run until they are stopped (Kubeflow's
// MPIJob), and the job master shown apart from the job's tasks.
#include <sys/stat.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A task's state as `-o json` prints it ("KILLED").
std::string StateOf(const nlohmann::json& task) { return task.value("state", ""); }

// An integer field (`-o json` prints 64-bit ones as JSON numbers too).
int64_t IntOf(const nlohmann::json& j, const std::string& key) { return j.value(key, int64_t{0}); }

// Sum of the "slots=N" of a hostfile.
int Slots(const std::string& hostfile) {
  int total = 0;
  for (absl::string_view line : absl::StrSplit(hostfile, '\n', absl::SkipEmpty())) {
    size_t at = line.find("slots=");
    int n = 0;
    if (at != absl::string_view::npos && absl::SimpleAtoi(line.substr(at + 6), &n)) total += n;
  }
  return total;
}

// The launcher waits for both workers to be up (as mpirun needs its hosts),
// keeps the hostfile it was given, and exits 0; the workers, like sshd,
// never exit by themselves.
TEST(FrameworksTest, AnMpiJobSucceedsWhenItsLauncherDoesAndItsWorkersAreStopped) {
  Cluster c;
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string out = MakeOut(c);
  std::string job = c.Submit(absl::StrCat(R"(name: mpi
framework: mpi
replicas:
  launcher:
    count: 1
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'for i in $(seq 1 600); do [ -e )", out, "/worker-0 ] && [ -e ", out,
                                          R"(/worker-1 ] && break; sleep 0.05; done; cp "$TRAINYARD_MPI_HOSTFILE" )",
                                          out, R"(/hostfile; echo "${TRAINYARD_JOB_MASTER:-none}" > )", out,
                                          R"(/master; echo "$TRAINYARD_NUM_WORKERS" > )", out, R"(/workers']
  worker:
    count: 2
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'touch )", out, R"(/worker-$TRAINYARD_INDEX; exec sleep 1000']
)"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(30))) << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  EXPECT_THAT(d.value("reason", ""), HasSubstr("the launcher completed"));
  EXPECT_EQ(Slots(ReadFile(out + "/hostfile")), 2) << "the launcher is not a rank: " << ReadFile(out + "/hostfile");
  EXPECT_EQ(ReadFile(out + "/workers"), "2\n");
  // An MPI job has no task that talks to a job master: none is started.
  EXPECT_EQ(ReadFile(out + "/master"), "none\n");
  EXPECT_TRUE(Task(d, "jobmaster").empty()) << d.dump(2);
  // The workers were stopped once the launcher had succeeded.
  EXPECT_TRUE(WaitUntil([&] {
    nlohmann::json now = c.Describe(job);
    return StateOf(Task(now, "worker", 0)) == "KILLED" && StateOf(Task(now, "worker", 1)) == "KILLED";
  }, absl::Seconds(20))) << c.Describe(job).dump(2);
}

TEST(FrameworksTest, AnMpiJobFailsWhenItsLauncherFails) {
  Cluster c;
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(R"(name: mpi-bad
framework: mpi
replicas:
  launcher:
    count: 1
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'exit 3']
  worker:
    count: 2
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'exec sleep 1000']
)");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "FAILED", absl::Seconds(30))) << c.Describe(job).dump(2);
  EXPECT_THAT(c.Describe(job).value("reason", ""), HasSubstr("launcher-0 failed: exit code 3"));
}

// The master is the server's: `jobs` counts the job's own tasks, `describe`
// shows it on its own line and, stopped at the job's end, not as a kill; it
// reserves what it uses.
TEST(FrameworksTest, TheJobMasterIsShownApartAndStoppedWithItsJob) {
  Cluster c;
  ASSERT_TRUE(c.WaitNodesReady(2));
  std::string job = c.Submit(R"(name: two
replicas:
  worker:
    count: 2
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'exit 0']
)");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED"));
  nlohmann::json master = Task(c.Describe(job), "jobmaster");
  ASSERT_FALSE(master.empty()) << "a job of framework none talks to its master";
  EXPECT_EQ(IntOf(master, "memory_mb"), 64);
  EXPECT_EQ(IntOf(master, "vcores_milli"), 50);
  ASSERT_TRUE(WaitUntil([&] { return StateOf(Task(c.Describe(job), "jobmaster")) == "SUCCEEDED"; },
                      absl::Seconds(20)))
      << c.Describe(job).dump(2);
  CommandResult d = c.Cli({"describe", job});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr("Master:"));
  EXPECT_THAT(d.out, HasSubstr("stopped with the job"));
  EXPECT_THAT(d.out, Not(HasSubstr("jobmaster-0")));
  EXPECT_THAT(d.out, Not(HasSubstr("KILLED")));
  EXPECT_THAT(d.out, HasSubstr("(2 tasks"));
  CommandResult jobs = c.Cli({"jobs", "-a"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_THAT(jobs.out, HasSubstr(" 0/2 "));
}

}  // namespace
}  // namespace trainyard::testing
