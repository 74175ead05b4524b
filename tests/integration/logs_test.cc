// `trainyard logs` without -f, end to end: attempts read where they ran
// after the task moved, the options that pick and shape lines (--tail,
// --since, --timestamps, --prefix), a job that has not started, and -f
// waiting for a task to start.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// The job's worker 0 (the job master is a task of the job too).
nlohmann::json Task0(const nlohmann::json& d) {
  for (const auto& t : d["tasks"]) {
    if (t.value("role", "") == "worker" && t.value("index", 0) == 0) return t;
  }
  return nlohmann::json::object();
}

std::string EventsText(const nlohmann::json& d) {
  std::string all;
  for (const auto& e : d["events"]) all += e.value("text", "") + "\n";
  return all;
}

TEST(LogsTest, AnAttemptOnANodeTheTaskLeftIsReadThereAndALostNodeIsNamed) {
  Cluster c({.nodes = 2, .node_timeout_ms = 1500});
  std::string job = c.Submit(R"(
name: mover
replicas:
  worker:
    restartPolicy: OnFailure
    maxRestarts: 3
    command: [sh, -c, 'echo "attempt $TRAINYARD_ATTEMPT"; exec sleep 600']
)");
  ASSERT_TRUE(WaitUntil([&] { return c.Cli({"logs", job, "worker/0"}).out == "attempt 0\n"; }, absl::Seconds(30)))
      << c.Describe(job).dump(2);
  std::string first = Task0(c.Describe(job)).value("node", "");
  int gone = first == "node-0" ? 0 : 1;
  c.agent(gone).Kill();
  ASSERT_TRUE(WaitUntil([&] {
    nlohmann::json t = Task0(c.Describe(job));
    return t.value("node", "") != first && t.value("attempt", 0) == 1 && t.value("state", "") == "RUNNING";
  }, absl::Seconds(30), absl::Milliseconds(100)))
      << c.Describe(job).dump(2);
  // The event names the attempt that `logs --attempt` reads.
  EXPECT_THAT(EventsText(c.Describe(job)), HasSubstr("(attempt 1)"));
  EXPECT_THAT(EventsText(c.Describe(job)), ::testing::Not(HasSubstr("(attempt 2)")));
  ASSERT_TRUE(WaitUntil([&] { return c.Cli({"logs", job, "worker/0"}).out == "attempt 1\n"; }, absl::Seconds(30)));

  CommandResult down = c.Cli({"logs", job, "worker/0", "--attempt", "0"});
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.err, HasSubstr(absl::StrCat("attempt 0 of mover-worker-0 ran on ", first, ", which is LOST")));

  c.RestartAgent(gone);
  CommandResult back;
  EXPECT_TRUE(WaitUntil([&] {
    back = c.Cli({"logs", job, "worker/0", "--attempt", "0"});
    return back.exit_code == 0;
  }, absl::Seconds(30), absl::Milliseconds(100)))
      << back.err;
  EXPECT_EQ(back.out, "attempt 0\n");
  EXPECT_EQ(c.Cli({"logs", job, "worker/0", "--attempt", "1"}).out, "attempt 1\n");
  c.Cli({"kill", job});
}

// `trainyard logs ARGS... --server ADDRESS` run to its end with stdout and
// stderr in one file, as a terminal shows them.
std::string Combined(Cluster& c, const std::vector<std::string>& args) {
  std::string out = absl::StrCat(c.dir(), "/logs-", FreePort(), ".out");
  std::vector<std::string> argv = {TrainyardBin(), "logs"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--server", c.address()});
  Process p(argv, out);
  EXPECT_TRUE(WaitUntil([&] { return !p.Running(); }, absl::Seconds(30)));
  return ReadFile(out);
}

// A shell loop that waits until the task's own log `file` holds `text`:
// the task orders its stdout and stderr writes by what the keeper wrote.
// Its logs are DATA/logs/job_ID/worker-0 where its dir is DATA/work/job_ID/worker-0.
std::string After(const std::string& file, const std::string& text) {
  return absl::StrCat("until grep -q ", text, " \"${TRAINYARD_TASK_DIR%/work/*}/logs/${TRAINYARD_TASK_DIR#*/work/}/",
                      file, "\" 2>/dev/null; do sleep 0.01; done; ");
}

TEST(LogsTest, StdoutAndStderrInterleaveInTimeOrderAndTailSinceTimestampsPrefixShapeThem) {
  Cluster c({.nodes = 1});
  std::string job = c.Submit(absl::StrCat(R"(
name: shapes
replicas:
  worker:
    command: [sh, -c, 'echo out1; )", After("attempt-0.stdout", "out1"), R"(echo err1 >&2; )",
                                          After("attempt-0.stderr", "err1"), R"(echo out2; )",
                                          After("attempt-0.stdout", "out2"), R"(echo err2 >&2']
)"));
  ASSERT_EQ(job, "shapes");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  EXPECT_EQ(Combined(c, {job, "worker/0"}), "out1\nerr1\nout2\nerr2\n");
  EXPECT_EQ(Combined(c, {job, "worker/0", "--tail", "3"}), "err1\nout2\nerr2\n");
  EXPECT_EQ(Combined(c, {job, "worker/0", "--prefix", "--tail", "1"}), "[shapes-worker-0] err2\n");
  EXPECT_EQ(Combined(c, {job, "worker/0", "--since", "1h"}), "out1\nerr1\nout2\nerr2\n");
  EXPECT_EQ(Combined(c, {job, "worker/0", "--since", "2099-01-01T00:00:00Z"}), "");

  std::string stamped = Combined(c, {job, "worker/0", "--timestamps"});
  std::vector<std::string> lines = absl::StrSplit(stamped, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << stamped;
  for (const std::string& line : lines) {
    EXPECT_THAT(line, ::testing::MatchesRegex("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:.]+Z (out|err)[12]")) << line;
  }
  // --since the second line's time: it and what follows.
  std::string second = lines[1].substr(0, lines[1].find(' '));
  EXPECT_EQ(Combined(c, {job, "worker/0", "--since", second}), "err1\nout2\nerr2\n");
}

TEST(LogsTest, AWholeJobsLogsPrefixEachLineWithItsTask) {
  Cluster c({.nodes = 1});
  std::string job = c.Submit(R"(
name: pair
replicas:
  worker:
    count: 2
    command: [sh, -c, 'echo "hello from $TRAINYARD_INDEX"']
)");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  CommandResult all = c.Cli({"logs", job});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("[pair-worker-0] hello from 0\n"));
  EXPECT_THAT(all.out, HasSubstr("[pair-worker-1] hello from 1\n"));
  EXPECT_EQ(c.Cli({"logs", job, "worker/1"}).out, "hello from 1\n");  // one task: no prefix
}

TEST(LogsTest, AQueuedJobHasNotStartedAndFollowWaitsForItsStart) {
  Cluster c({.nodes = 1});
  std::string big = c.Submit(R"(
name: big
replicas:
  worker:
    resources: {gpus: 8, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'exec sleep 600']
)");
  ASSERT_TRUE(c.WaitForState(big, "RUNNING")) << c.Describe(big).dump(2);
  std::string waits = c.Submit(R"(
name: waits
replicas:
  worker:
    resources: {gpus: 8, cpu: 0.5, memory: 64Mi}
    command: [sh, -c, 'echo finally started']
)");
  ASSERT_EQ(c.JobState(waits), "QUEUED");
  CommandResult queued = c.Cli({"logs", waits});
  EXPECT_NE(queued.exit_code, 0);
  EXPECT_THAT(queued.err, HasSubstr("job waits has not started yet (QUEUED"));
  EXPECT_EQ(queued.err.find("never ran"), std::string::npos) << queued.err;

  std::string out = c.dir() + "/follow.out";
  Process follow({TrainyardBin(), "logs", waits, "worker/0", "-f", "--server", c.address()}, out);
  c.Cli({"kill", big});
  ASSERT_TRUE(WaitUntil([&] { return !follow.Running(); }, absl::Seconds(30))) << ReadFile(out);
  EXPECT_EQ(ReadFile(out), "finally started\n");
  EXPECT_EQ(c.JobState(waits), "SUCCEEDED");
}

TEST(LogsTest, AChattyTasksLogIsCappedOnItsNodeAndSaysWhatWasDropped) {
  Cluster c({.nodes = 1, .agent_flags = {"--log-max-attempt-bytes", "262144"}});
  std::string job = c.Submit(R"(
name: chatty
replicas:
  worker:
    command: [sh, -c, 'i=0; while [ $i -lt 40000 ]; do echo "line $i of a chatty task"; i=$((i+1)); done']
)");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  int64_t kept = 0;
  std::error_code ec;
  std::string logs_dir = absl::StrCat(c.dir(), "/node-0/logs/job_", c.Describe(job).value("id", 0), "/worker-0");
  for (const auto& e : std::filesystem::directory_iterator(logs_dir, ec)) {
    if (absl::StrContains(e.path().filename().string(), ".stdout")) kept += std::filesystem::file_size(e.path());
  }
  EXPECT_GT(kept, 0);
  EXPECT_LE(kept, 262144 / 2 + 262144 / 16) << "the stdout half of the cap, and at most a segment more";
  CommandResult logs = c.Cli({"logs", job, "worker/0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("bytes of this log were dropped here"));
  EXPECT_TRUE(absl::EndsWith(logs.out, "line 39999 of a chatty task\n"));
  EXPECT_THAT(logs.out, ::testing::Not(HasSubstr("line 0 of a chatty task\n")));
  EXPECT_EQ(c.Cli({"logs", job, "worker/0", "--tail", "1"}).out, "line 39999 of a chatty task\n");
}

}  // namespace
}  // namespace trainyard::testing
