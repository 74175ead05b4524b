// `trainyard exec` and `trainyard attach` on a real cluster, as a user runs
// them: a command in a running task runs as the task runs (its environment,
// working dir and cgroups) and its exit code is the CLI's; input goes in
// with -i, a terminal with -t; a task that is not running, a command not
// found and another user's job are refused with the reason; a command
// still running when its task ends is ended with it, and says so.
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// The worker keeps its cgroups' names where exec finds them (its working
// dir), then sleeps; "quick" ends at once.
constexpr char kSpec[] = R"(name: shell
replicas:
  worker:
    count: 2
    resources: {cpu: 500m, memory: 256Mi}
    env: {GREETING: hello}
    command: [sh, -c, "cat /proc/self/cgroup > cgroups.txt; exec sleep 600"]
  quick:
    resources: {cpu: 100m, memory: 64Mi}
    command: ["true"]
)";

// `trainyard exec --server ADDR ARGS...` (the server flag before the
// command's `--`), as the user of `token` ("" : the admin).
CommandResult Exec(const Cluster& c, std::vector<std::string> args, const std::string& token = "") {
  args.insert(args.begin(), {"exec", "--server", c.address()});
  std::vector<std::string> env;
  if (!token.empty()) env.push_back("TRAINYARD_TOKEN=" + token);
  return RunCli(args, absl::Seconds(60), env);
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

TEST(ExecTest, ACommandRunsInTheTaskAsTheTaskRunsAndItsExitCodeIsTheClis) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string job = c.Submit(kSpec);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING")) << c.Describe(job).dump(2);

  // Its environment and working dir, its output on both streams, its code.
  CommandResult r;
  ASSERT_TRUE(WaitUntil([&] {
    r = Exec(c, {job, "worker/1", "--", "sh", "-c",
                 "test -s cgroups.txt || exit 99; echo $TRAINYARD_ROLE $TRAINYARD_INDEX $GREETING; echo oops >&2; exit 7"});
    return r.exit_code != 99;  // the task wrote its file
  }, absl::Seconds(30))) << r.err;
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out, "worker 1 hello\n");
  EXPECT_THAT(r.err, HasSubstr("oops\n"));

  // In the task's own cgroups (v1 or v2; here the attempt's, not the
  // agent's): counted against its limits, ended with it.
  r = Exec(c, {job, "worker/1", "--", "sh", "-c",
               "cat /proc/self/cgroup > mine.txt; cmp -s cgroups.txt mine.txt && echo same; "
               "cat cgroups.txt mine.txt"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "same\n")) << r.out;

  // Input with -i; the index is 0 when left out.
  std::string cli = TrainyardBin() + " exec --server " + c.address() + " -i " + job + " worker -- ";
  r = RunCommandLine({"/bin/sh", "-c", "printf 'one\\ntwo\\nthree\\n' | " + cli + "sh -c 'echo $TRAINYARD_INDEX; wc -l'"},
                     absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0\n3\n");

  // A terminal with -t (script(1) gives the CLI one).
  std::string with_tty = TrainyardBin() + " exec --server " + c.address() + " -t " + job +
                         " worker -- sh -c " + Quote("test -t 0 && test -t 1 && echo on-a-terminal");
  r = RunCommandLine({"/usr/bin/script", "-qec", with_tty, "/dev/null"}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("on-a-terminal"));

  // A signal's end is 128 + its number, as a shell tells it.
  r = Exec(c, {job, "worker", "--", "sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.exit_code, 128 + 15) << r.err;

  // Refusals name the reason.
  r = Exec(c, {job, "worker", "--", "no-such-command-here"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot run the command no-such-command-here"));
  r = Exec(c, {job, "ps/0", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("job shell has no task ps/0"));
  ASSERT_TRUE(WaitUntil([&] {
    r = Exec(c, {job, "quick", "--", "true"});
    return absl::StrContains(r.err, "is not running now");
  }, absl::Seconds(30))) << r.err;
  EXPECT_EQ(r.exit_code, 1);
  r = Exec(c, {"nosuch", "worker", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("job 'nosuch' does not exist"));
  r = RunCli({"exec", "--server", c.address(), job, "worker"});
  EXPECT_EQ(r.exit_code, 2) << "no command: a usage error";

  // A command that outlives its task is ended with it, and says so.
  std::string started = c.dir() + "/exec-started";
  CommandResult held;
  std::thread holder([&] {
    held = Exec(c, {job, "worker", "--", "sh", "-c", "touch " + started + "; sleep 600"});
  });
  EXPECT_TRUE(WaitUntil([&] { return access(started.c_str(), F_OK) == 0; }, absl::Seconds(30)));
  EXPECT_EQ(c.Cli({"kill", job}).exit_code, 0);
  holder.join();
  EXPECT_EQ(held.exit_code, 128 + 9) << held.err;
  EXPECT_THAT(held.err, HasSubstr("the task's attempt ended"));

  // /metrics counts the sessions; none is left open.
  HttpResult m;
  ASSERT_TRUE(WaitUntil([&] {
    m = HttpGet(c.http_address(), "/metrics");
    return MetricSample(m.body, "trainyard_exec_sessions_open").value_or(-1) == 0.0;
  }, absl::Seconds(30))) << m.body;
  EXPECT_GE(MetricSample(m.body, "trainyard_exec_sessions_total").value_or(0), 7.0);
}

TEST(ExecTest, OnlyTheJobsOwnerOrAnAdminRunsCommandsInItsTasks) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string alice = c.UserToken("alice"), mallory = c.UserToken("mallory");
  WriteFile(c.dir() + "/job.yaml",
            "name: mine\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
            "    command: [sleep, \"600\"]\n");
  CommandResult submitted = c.CliAs(alice, {"submit", c.dir() + "/job.yaml"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  ASSERT_TRUE(c.WaitForState("mine", "RUNNING"));

  CommandResult r = Exec(c, {"mine", "worker", "--", "echo", "mallory was here"}, mallory);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("may not run commands in job mine's tasks"));
  EXPECT_EQ(r.out, "");
  r = Exec(c, {"mine", "worker", "--", "echo", "alice's"}, alice);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "alice's\n");
  r = Exec(c, {"mine", "worker", "--", "echo", "the admin's"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "the admin's\n");
  r = RunCli({"exec", "--server", c.address(), "mine", "worker", "--", "true"}, absl::Seconds(60),
             {"TRAINYARD_TOKEN"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("token"));
}

TEST(ExecTest, AttachShowsTheTasksOutputFromNowOn) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string go = c.dir() + "/go", end = c.dir() + "/end";
  // It ticks until told to go on, so an attach sees it is live; then it
  // writes both outputs and waits to be told to end.
  WriteFile(c.dir() + "/job.yaml",
            "name: chatty\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
            "    command: [sh, -c, \"echo before; while [ ! -e " + go +
                " ]; do echo tick; sleep 0.1; done; echo after; echo problem >&2; " + WaitForFile(end) + "\"]\n");
  ASSERT_EQ(c.Cli({"submit", c.dir() + "/job.yaml"}).exit_code, 0);
  ASSERT_TRUE(c.WaitForState("chatty", "RUNNING"));
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(c.Cli({"logs", "chatty"}).out, "before"); },
                        absl::Seconds(30)));
  std::string log = c.dir() + "/attach.log";
  Process attach({TrainyardBin(), "attach", "--server", c.address(), "chatty", "worker"}, log);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(ReadFile(log), "tick"); }, absl::Seconds(30)))
      << ReadFile(log);
  WriteFile(go, "");
  ASSERT_TRUE(WaitUntil([&] {
    std::string seen = ReadFile(log);
    return absl::StrContains(seen, "after\n") && absl::StrContains(seen, "problem\n");
  }, absl::Seconds(30))) << ReadFile(log);
  // It follows until the job ends.
  EXPECT_TRUE(attach.Running());
  WriteFile(end, "");
  ASSERT_TRUE(WaitUntil([&] { return !attach.Running(); }, absl::Seconds(60))) << ReadFile(log);
  EXPECT_EQ(attach.exit_status(), 0);
  std::string out = ReadFile(log);
  EXPECT_THAT(out, HasSubstr("after\n"));
  EXPECT_THAT(out, HasSubstr("problem\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("before"))) << "only what the task wrote after attaching";
}

}  // namespace
}  // namespace trainyard::testing
