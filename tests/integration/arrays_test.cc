// Job arrays, dependencies and hold on a real cluster, through the CLI as a
// user runs them: an array of 4 with %2 runs two elements at a time, each
// with its TRAINYARD_ARRAY_* env; a job after-ok on the array waits for all
// of them; a held job waits for `trainyard release`.
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

TEST(ArraysTest, AThrottledArrayADependentJobAndAHeldJobReleased) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  // Each element waits for its own go file, then says who it is.
  std::string sweep = c.dir() + "/sweep.yaml";
  WriteFile(sweep, absl::StrCat(R"(
name: sweep
replicas:
  worker:
    command: [sh, -c, ')", WaitForFile(out + "/go-$TRAINYARD_ARRAY_INDEX"),
                                R"(; echo "$TRAINYARD_ARRAY_JOB $TRAINYARD_ARRAY_INDEX" > )", out,
                                R"(/seen-$TRAINYARD_ARRAY_INDEX']
)"));
  CommandResult r = c.Cli({"submit", "--array", "0-3%2", sweep});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("array sweep submitted: 4 jobs (sweep-0 ... sweep-3)"));

  std::string report = c.dir() + "/report.yaml";
  WriteFile(report, "name: report\nreplicas:\n  worker:\n    command: [true]\n");
  r = c.Cli({"submit", "--after-ok", "sweep", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job report submitted"));
  r = c.Cli({"submit", "--after-ok", "nosuch", report});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("dependencies.afterOk[0]: job 'nosuch' does not exist"));

  std::string held = c.dir() + "/held.yaml";
  WriteFile(held, "name: held\nreplicas:\n  worker:\n    command: [true]\n");
  r = c.Cli({"submit", "--hold", held});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job held submitted (held: trainyard release held)"));

  ASSERT_TRUE(c.WaitForState("sweep-0", "RUNNING"));
  ASSERT_TRUE(c.WaitForState("sweep-1", "RUNNING"));
  // What `jobs` shows: every element by its index, and why the others wait.
  std::string jobs;
  ASSERT_TRUE(WaitUntil([&] {
    jobs = c.Cli({"jobs"}).out;
    return jobs.find("array sweep: 2 of its elements already placed") != std::string::npos;
  }, absl::Seconds(10))) << jobs;
  for (const char* e : {"sweep-0", "sweep-1", "sweep-2", "sweep-3"}) EXPECT_THAT(jobs, HasSubstr(e));
  EXPECT_THAT(jobs, HasSubstr("waiting for job sweep (after-ok)"));
  EXPECT_THAT(jobs, HasSubstr("held (trainyard release held)"));
  EXPECT_EQ(c.JobState("sweep-2"), "QUEUED");
  r = c.Cli({"describe", "sweep-2"});
  EXPECT_THAT(r.out, HasSubstr("Array:      sweep (index 2)"));
  EXPECT_THAT(c.Cli({"describe", "report"}).out, HasSubstr("After ok:   sweep"));

  // Two at a time: 0 ends, 2 starts; 3 still waits.
  WriteFile(out + "/go-0", "");
  ASSERT_TRUE(c.WaitForState("sweep-0", "SUCCEEDED"));
  ASSERT_TRUE(c.WaitForState("sweep-2", "RUNNING"));
  EXPECT_EQ(c.JobState("sweep-3"), "QUEUED");
  for (int i = 1; i < 4; ++i) WriteFile(absl::StrCat(out, "/go-", i), "");
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.WaitForState(absl::StrCat("sweep-", i), "SUCCEEDED")) << c.Describe(absl::StrCat("sweep-", i)).dump(2);
    EXPECT_EQ(ReadFile(absl::StrCat(out, "/seen-", i)), absl::StrCat("sweep ", i, "\n"));
  }
  ASSERT_TRUE(c.WaitForState("report", "SUCCEEDED")) << c.Describe("report").dump(2);

  // The held job never ran meanwhile; released, it does.
  EXPECT_EQ(c.JobState("held"), "QUEUED");
  r = c.Cli({"release", "held"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job held released"));
  ASSERT_TRUE(c.WaitForState("held", "SUCCEEDED")) << c.Describe("held").dump(2);
}

}  // namespace
}  // namespace trainyard::testing
