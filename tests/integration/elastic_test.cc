// Elastic jobs end to end on a real cluster (docs/elastic.md): a job whose
// workers say `count: 4, minCount: 2` starts with the two that fit beside
// other work, grows to four when that work ends, shrinks back to two when
// production work needs the room, grows again when it is done, and
// finishes. Each resize is a coordinated checkpoint: the workers save
// when their master passes on the order, and every start resumes at the
// step saved, with TRAINYARD_NUM_WORKERS and the membership epoch of its
// size.
#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

// A start of a worker as it noted it: the step it resumed at, the workers
// of its size and its membership epoch.
struct Start {
  int64_t step = -1;
  int64_t workers = -1;
  int64_t epoch = -1;
  bool operator==(const Start& o) const { return step == o.step && workers == o.workers && epoch == o.epoch; }
};

std::vector<Start> Starts(const std::string& text) {
  std::vector<Start> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    Start s;
    if (f.size() == 3 && absl::SimpleAtoi(f[0], &s.step) && absl::SimpleAtoi(f[1], &s.workers) &&
        absl::SimpleAtoi(f[2], &s.epoch)) {
      out.push_back(s);
    }
  }
  return out;
}

// Workers that count steps from TRAINYARD_RESUME_STEP, note each start in
// OUT/start-INDEX, save when ordered (OUT/saved-INDEX) and complete once
// OUT/finish exists (their last step in OUT/end-INDEX).
std::string ElasticSpec(const std::string& out) {
  std::string bin = TrainyardBin();
  std::string script = absl::StrCat(
      "step=${TRAINYARD_RESUME_STEP:-0}; ",
      "echo \"$step $TRAINYARD_NUM_WORKERS $TRAINYARD_MEMBERSHIP_EPOCH\" >> ", out, "/start-$TRAINYARD_INDEX; ",
      bin, " worker state RUNNING || exit 1; ",
      "while [ ! -e ", out, "/finish ]; do step=$((step+1)); sleep 0.05; ",
      "if ", bin, " worker checkpoint-requested > /dev/null; then echo $step >> ", out, "/saved-$TRAINYARD_INDEX; ",
      bin, " worker checkpoint-done $step || exit 1; fi; done; echo $step >> ", out, "/end-$TRAINYARD_INDEX; ", bin,
      " worker state COMPLETED");
  return absl::StrCat(R"(name: elastic
replicas:
  worker:
    count: 4
    minCount: 2
    resources: {gpus: 2}
    command: [sh, -c, ')", script, R"(']
)");
}

TEST(ElasticTest, AJobGrowsIntoRoomShrinksForProductionWorkGrowsBackAndFinishesFromItsCheckpoints) {
  // A grace far longer than the test waits: each resize stops the tasks
  // because they saved, not because the grace ran out.
  Cluster c({.nodes = 1,
             .server_flags = {"--preemption-grace-ms", "600000", "--elastic-grow-after-ms", "1000"}});
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  auto starts = [&](int i) { return Starts(ReadFile(absl::StrCat(out, "/start-", i))); };
  auto wait_starts = [&](int i, size_t n) {
    return WaitUntil([&] { return starts(i).size() >= n; }, absl::Seconds(90), absl::Milliseconds(100));
  };

  std::string filler = c.Submit("name: filler\nreplicas:\n  worker:\n    resources: {gpus: 4}\n"
                                "    command: [sleep, '600']\n");
  ASSERT_TRUE(c.WaitForState(filler, "RUNNING", absl::Seconds(60)));
  std::string job = c.Submit(ElasticSpec(out));

  // Epoch 1: the two that fit beside the filler.
  ASSERT_TRUE(wait_starts(0, 1) && wait_starts(1, 1)) << c.Describe(job).dump(2);
  ASSERT_TRUE(c.WaitForState(job, "RUNNING", absl::Seconds(60))) << c.Describe(job).dump(2);
  EXPECT_EQ(starts(0)[0], (Start{0, 2, 1}));
  EXPECT_THAT(c.Cli({"describe", job}).out, HasSubstr("Elastic:    membership epoch 1, 2 of 4 tasks placed"));

  // Epoch 2: the filler ends; the job saves and grows to four.
  ASSERT_EQ(c.Cli({"kill", filler}).exit_code, 0);
  ASSERT_TRUE(wait_starts(3, 1) && wait_starts(0, 2)) << c.Describe(job).dump(2);
  int64_t first = starts(0)[1].step;
  EXPECT_EQ(starts(0)[1], (Start{first, 4, 2}));
  EXPECT_EQ(starts(3)[0], (Start{first, 4, 2})) << "a new worker starts where the others saved";

  // Epoch 3: production work takes four GPUs; the job saves and shrinks
  // to two beside it.
  ASSERT_TRUE(c.WaitForState(job, "RUNNING", absl::Seconds(60))) << c.Describe(job).dump(2);
  std::string prod = c.Submit("name: urgent\npriority: production\nreplicas:\n  worker:\n"
                              "    resources: {gpus: 4}\n    command: [sleep, '3']\n");
  ASSERT_TRUE(wait_starts(0, 3)) << c.Describe(job).dump(2);
  int64_t second = starts(0)[2].step;
  EXPECT_EQ(starts(0)[2], (Start{second, 2, 3}));
  EXPECT_GT(second, first);

  // Epoch 4: the production job ends; the job grows back to four.
  ASSERT_TRUE(c.WaitForState(prod, "SUCCEEDED", absl::Seconds(90))) << c.Describe(prod).dump(2);
  ASSERT_TRUE(wait_starts(3, 2) && wait_starts(0, 4)) << c.Describe(job).dump(2);
  int64_t third = starts(0)[3].step;
  EXPECT_EQ(starts(0)[3], (Start{third, 4, 4}));
  EXPECT_GT(third, second);

  // It finishes, every worker past the step it last resumed at.
  ASSERT_TRUE(c.WaitForState(job, "RUNNING", absl::Seconds(60))) << c.Describe(job).dump(2);
  WriteFile(out + "/finish", "");
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED", absl::Seconds(90))) << c.Describe(job).dump(2);
  for (int i = 0; i < 4; ++i) {
    std::vector<Start> s = starts(i);
    ASSERT_FALSE(s.empty()) << "worker " << i;
    std::vector<int64_t> end = NumberLines(ReadFile(absl::StrCat(out, "/end-", i)));
    ASSERT_EQ(end.size(), 1u) << "worker " << i << " completed once";
    EXPECT_GE(end[0], s.back().step) << "worker " << i;
    // Every start but the last ended in a save at or past the step it
    // started at; a start in the next epoch resumed at most there (the step
    // all workers saved): work is lost only since the order.
    std::vector<int64_t> saved = NumberLines(ReadFile(absl::StrCat(out, "/saved-", i)));
    ASSERT_EQ(saved.size(), s.size() - 1) << "worker " << i;
    for (size_t k = 0; k < saved.size(); ++k) {
      EXPECT_GE(saved[k], s[k].step) << "worker " << i << " save " << k;
      if (s[k + 1].epoch == s[k].epoch + 1) {
        EXPECT_LE(s[k + 1].step, saved[k]) << "worker " << i << " start " << k + 1;
      }
      EXPECT_GE(s[k + 1].step, s[k].step) << "worker " << i << " start " << k + 1;
    }
  }
  EXPECT_EQ(starts(2).size(), 2u) << "workers 2 and 3 ran in epochs 2 and 4 only";
  nlohmann::json d = c.Describe(job);
  EXPECT_EQ(d["membership_epoch"], 4) << d.dump(2);
  int resized = 0, membership = 0;
  for (const auto& e : d["events"]) {
    resized += e["kind"] == "resizing" ? 1 : 0;
    membership += e["kind"] == "membership" ? 1 : 0;
  }
  EXPECT_EQ(resized, 2) << "grown twice; the shrink was a preemption" << d.dump(2);
  EXPECT_EQ(membership, 4) << d.dump(2);
}

}  // namespace
}  // namespace trainyard::testing
