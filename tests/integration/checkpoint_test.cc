// Coordinated checkpoints end to end on a real cluster: a preempted job's
// shell workers hear the order from their master (`trainyard worker
// checkpoint-requested`), save, report the step (`checkpoint-done`), are
// stopped long before the preemption's grace ends, and start again at the
// saved step (TRAINYARD_RESUME_STEP). A job past its time limit saves the
// same way before it ends DEADLINE_EXCEEDED.
#include <sys/stat.h>

#include <algorithm>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// Workers that count steps from TRAINYARD_RESUME_STEP (0 on the first start,
// noted in OUT/start-INDEX), save when ordered (the step appended to
// OUT/saved-INDEX), and complete `more` steps after a resumed start.
std::string StepSpec(const std::string& name, const std::string& out, const std::string& extra, int gpus,
                     int more) {
  std::string bin = TrainyardBin();
  std::string script = absl::StrCat(
      "step=${TRAINYARD_RESUME_STEP:-0}; echo $step >> ", out, "/start-$TRAINYARD_INDEX; ",
      "limit=1000000; [ -n \"$TRAINYARD_RESUME_STEP\" ] && limit=$((step+", more, ")); ",
      bin, " worker state RUNNING || exit 1; ",
      "while [ $step -lt $limit ]; do step=$((step+1)); sleep 0.05; ",
      "if ", bin, " worker checkpoint-requested > /dev/null; then echo $step >> ", out, "/saved-$TRAINYARD_INDEX; ",
      bin, " worker checkpoint-done $step || exit 1; fi; done; ", bin, " worker state COMPLETED");
  return absl::StrCat("name: ", name, "\n", extra, R"(
replicas:
  worker:
    count: 2
    resources: {gpus: )", gpus, R"(}
    command: [sh, -c, ')", script, R"(']
)");
}

TEST(CheckpointTest, APreemptedJobSavesWhenOrderedIsStoppedAtOnceAndResumesAtTheSavedStep) {
  // A grace far longer than the test waits: the victim must be stopped
  // because its workers saved, not because the grace ran out.
  Cluster c({.nodes = 1, .server_flags = {"--preemption-grace-ms", "600000"}});
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string low = c.Submit(StepSpec("low", out, "priority: ptr", 4, 20));
  ASSERT_TRUE(WaitUntil([&] { return NumberLines(ReadFile(out + "/start-1")).size() == 1; }, absl::Seconds(60),
                        absl::Milliseconds(100)));
  ASSERT_TRUE(c.WaitForState(low, "RUNNING", absl::Seconds(60)));
  // Its master listens (the server's push below finds its port open).
  ASSERT_TRUE(WaitUntil(
      [&] {
        CommandResult logs = c.Cli({"logs", low, "jobmaster"});
        return logs.err.find("waiting for 2 workers") != std::string::npos;
      },
      absl::Seconds(60), absl::Milliseconds(200)));
  std::string prod = c.Submit(R"(
name: urgent
priority: production
replicas:
  worker:
    resources: {gpus: 8}
    command: [sh, -c, 'sleep 1']
)");
  // Told, both saved, the victim stopped: the production job runs well
  // within the 600 s grace.
  ASSERT_TRUE(c.WaitForState(prod, "SUCCEEDED", absl::Seconds(120))) << c.Describe(low).dump(2);
  ASSERT_TRUE(c.WaitForState(low, "SUCCEEDED", absl::Seconds(120))) << c.Describe(low).dump(2);

  std::vector<int64_t> saved0 = NumberLines(ReadFile(out + "/saved-0"));
  std::vector<int64_t> saved1 = NumberLines(ReadFile(out + "/saved-1"));
  ASSERT_EQ(saved0.size(), 1u) << "each worker saves once per order";
  ASSERT_EQ(saved1.size(), 1u);
  int64_t step = std::min(saved0[0], saved1[0]);
  nlohmann::json d = c.Describe(low);
  EXPECT_TRUE(HasEvent(d, "checkpointed", absl::StrCat("2 workers saved step ", step, ";"))) << d.dump(2);
  EXPECT_FALSE(HasEvent(d, "checkpoint", "by the deadline")) << d.dump(2);
  EXPECT_EQ(d["resume_step"], step);
  EXPECT_EQ(d["checkpoint_order"]["id"], 0) << "closed";
  // Each worker started twice: at 0, then at the step they saved together.
  EXPECT_EQ(NumberLines(ReadFile(out + "/start-0")), (std::vector<int64_t>{0, step}));
  EXPECT_EQ(NumberLines(ReadFile(out + "/start-1")), (std::vector<int64_t>{0, step}));
  // describe says where it resumes.
  EXPECT_THAT(c.Cli({"describe", low}).out, HasSubstr(absl::StrCat("Resumes at: step ", step)));
  // The order reached the master pushed to its port, not only in the answer
  // to its next figures report.
  CommandResult logs = c.Cli({"logs", low, "jobmaster", "--attempt", "0"});
  std::string master_log = logs.out + logs.err;  // the master logs to its standard error
  EXPECT_THAT(master_log, HasSubstr("the server pushed order")) << master_log;
}

TEST(CheckpointTest, AJobPastItsTimeLimitSavesBeforeItEndsDeadlineExceeded) {
  Cluster c({.nodes = 1, .server_flags = {"--preemption-grace-ms", "60000"}});
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(StepSpec("limited", out, "activeDeadline: 3s", 1, 20));
  ASSERT_TRUE(c.WaitForState(job, "DEADLINE_EXCEEDED", absl::Seconds(60))) << c.Describe(job).dump(2);
  // Its tasks end once both saved, not after the 60 s given to checkpoint.
  ASSERT_TRUE(WaitUntil(
      [&] {
        nlohmann::json d = c.Describe(job);
        for (const auto& t : d["tasks"]) {
          if (t["state"] != "KILLED" && t["state"] != "FAILED" && t["state"] != "SUCCEEDED") return false;
        }
        return true;
      },
      absl::Seconds(40), absl::Milliseconds(200)))
      << c.Describe(job).dump(2);
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(NumberLines(ReadFile(out + "/saved-0")).size(), 1u);
  EXPECT_EQ(NumberLines(ReadFile(out + "/saved-1")).size(), 1u);
  EXPECT_TRUE(HasEvent(d, "checkpointed", "2 workers saved step ")) << d.dump(2);
}

}  // namespace
}  // namespace trainyard::testing
