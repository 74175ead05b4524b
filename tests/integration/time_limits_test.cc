// Jobs' time limits on real processes: a real server and agent run a
// `sleep` with `activeDeadline: 3s`; it ends DEADLINE_EXCEEDED and its
// process (found by the PID it wrote) is gone. The queue's maxTime refuses
// a longer limit at submission and its defaultTime is what describe, the
// REST API and `queues` show; a deadline counts on from the recorded start
// across a server restart.
#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// A task that writes its PID to `pid_file`, then sleeps (as the sleep: exec).
std::string SleepSpec(const std::string& name, const std::string& limit, const std::string& pid_file) {
  return absl::StrCat("name: ", name, "\nqueue: timed\n", limit.empty() ? "" : "activeDeadline: " + limit + "\n",
                      "replicas:\n  worker:\n    command: [sh, -c, \"echo $$ > ", pid_file,
                      "; exec sleep 600\"]\n");
}

class JobTimeLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(config_.path() + "/queues.yaml", "queues:\n  - {name: timed, maxTime: 1h, defaultTime: 30m}\n");
    options_.nodes = 1;
    options_.server_flags = {"--queue-config", config_.path() + "/queues.yaml"};
  }

  // Submits a sleep named `name` with `limit` to a cluster of one ready
  // node; its PID goes to pid_file(c, name). Returns the job's name.
  std::string SubmitSleep(Cluster& c, const std::string& name, const std::string& limit) {
    EXPECT_TRUE(c.WaitNodesReady(1));
    return c.Submit(SleepSpec(name, limit, PidFile(c, name)));
  }
  static std::string PidFile(const Cluster& c, const std::string& name) { return c.dir() + "/" + name + ".pid"; }

  TempDir config_;
  ClusterOptions options_;
};

TEST_F(JobTimeLimitsTest, ASleepPastItsActiveDeadlineEndsDeadlineExceededAndItsProcessIsGone) {
  Cluster c(options_);
  std::string job = SubmitSleep(c, "nap", "3s");
  ASSERT_EQ(job, "nap");
  int pid = 0;
  ASSERT_TRUE(WaitUntil([&] { return (pid = ReadPid(PidFile(c, job))) > 1; }, absl::Seconds(60))) << "the task never ran";
  ASSERT_TRUE(c.WaitForState(job, "DEADLINE_EXCEEDED", absl::Seconds(60))) << c.JobState(job);
  EXPECT_TRUE(WaitUntil([&] { return !Alive(pid); }, absl::Seconds(30)))
      << "the sleep (pid " << pid << ") still runs after its job ended";

  CommandResult d = c.Cli({"describe", job});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr("State:      DEADLINE_EXCEEDED"));
  EXPECT_THAT(d.out, HasSubstr("Reason:     ran past its activeDeadline of 3s (started at "));
  EXPECT_THAT(d.out, HasSubstr("Time limit: 3s (exceeded)"));
  EXPECT_THAT(d.out, HasSubstr("DEADLINE_EXCEEDED: ran past its activeDeadline of 3s"));
  CommandResult listed = c.Cli({"jobs", "--state", "deadline_exceeded"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("nap"));
  HttpResult rest = HttpGet(c.http_address(), "/api/v1/jobs/nap");
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.json["state"], "DEADLINE_EXCEEDED");
  EXPECT_EQ(rest.json["active_deadline_ms"], 3000);
  EXPECT_TRUE(rest.json["time_left_ms"].is_null()) << "nothing is left to count once it ended";
}

TEST_F(JobTimeLimitsTest, TheQueueRefusesALongerLimitAndGivesItsDefaultWhichDescribeCountsDown) {
  Cluster c(options_);
  ASSERT_TRUE(c.WaitNodesReady(1));
  WriteFile(c.dir() + "/long.yaml", SleepSpec("long", "2h", PidFile(c, "long")));
  CommandResult refused = c.Cli({"submit", c.dir() + "/long.yaml"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("activeDeadline: 2h is above the maximum of queue timed, 1h "
                                     "(maxTime in the queue config)"));
  CommandResult queues = c.Cli({"queues"});
  EXPECT_THAT(queues.out, HasSubstr("MAX TIME"));
  EXPECT_THAT(queues.out, HasSubstr("1h"));
  EXPECT_THAT(queues.out, HasSubstr("30m"));

  std::string job = SubmitSleep(c, "plain", "");
  ASSERT_EQ(job, "plain");
  ASSERT_TRUE(c.WaitForState(job, "RUNNING", absl::Seconds(60)));
  CommandResult d = c.Cli({"describe", job});
  EXPECT_THAT(d.out, HasSubstr("Time limit: 30m (")) << d.out;
  EXPECT_THAT(d.out, HasSubstr(" left)"));
  EXPECT_THAT(d.out, HasSubstr("activeDeadline 30m (queue timed's defaultTime)"));
  HttpResult rest = HttpGet(c.http_address(), "/api/v1/jobs/plain");
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.json["active_deadline_ms"], 30 * 60 * 1000);
  ASSERT_TRUE(rest.json["time_left_ms"].is_number()) << rest.body;
  EXPECT_GT(rest.json["time_left_ms"].get<int64_t>(), 0);
  EXPECT_LE(rest.json["time_left_ms"].get<int64_t>(), 30 * 60 * 1000);
  EXPECT_EQ(rest.json["deadline_unix_ms"].get<int64_t>(),
            rest.json["start_time_unix_ms"].get<int64_t>() + 30 * 60 * 1000);
  EXPECT_EQ(c.Cli({"kill", job}).exit_code, 0);
  EXPECT_TRUE(c.WaitForState(job, "KILLED"));
}

TEST_F(JobTimeLimitsTest, ADeadlineCountsOnFromTheRecordedStartAcrossAServerRestart) {
  Cluster c(options_);
  std::string job = SubmitSleep(c, "kept", "8s");
  ASSERT_EQ(job, "kept");
  ASSERT_TRUE(c.WaitForState(job, "RUNNING", absl::Seconds(60)));
  int pid = 0;
  ASSERT_TRUE(WaitUntil([&] { return (pid = ReadPid(PidFile(c, job))) > 1; }, absl::Seconds(30)));
  HttpResult before = HttpGet(c.http_address(), "/api/v1/jobs/kept");
  ASSERT_EQ(before.status, 200) << before.body;
  int64_t deadline = before.json["deadline_unix_ms"].get<int64_t>();
  ASSERT_GT(deadline, 0);

  c.KillServer();
  ASSERT_TRUE(c.RestartServer());
  // The job may already be over by the time the server answers again (a
  // slow restart): either way its deadline is the one set at its start.
  HttpResult after;
  ASSERT_TRUE(WaitUntil([&] {
    after = HttpGet(c.http_address(), "/api/v1/jobs/kept");
    return after.status == 200;
  }, absl::Seconds(30)));
  EXPECT_EQ(after.json["deadline_unix_ms"].get<int64_t>(), deadline) << "not counted again from the restart";
  ASSERT_TRUE(c.WaitForState(job, "DEADLINE_EXCEEDED", absl::Seconds(60))) << c.JobState(job);
  EXPECT_TRUE(WaitUntil([&] { return !Alive(pid); }, absl::Seconds(30)))
      << "the sleep (pid " << pid << ") still runs after its job ended";
}

}  // namespace
}  // namespace trainyard::testing
