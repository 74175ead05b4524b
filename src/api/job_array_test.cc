// Job arrays, dependencies and hold in the spec and in `--array`: what is
// accepted, and each refusal naming its field.
#include "api/job_array.h"

#include "api/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kReplicas[] = "replicas:\n  worker:\n    command: [x]\n";

std::string Refusal(const std::string& top) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec("name: j\n" + top + kReplicas, UnboundedLimits());
  if (spec.ok()) return "";
  return std::string(spec.status().message());
}

TEST(JobArrayTest, ALongTextIsRefusedBeforeItIsParsed) {
  std::string text = "0-999";
  while (text.size() <= kMaxArrayTextBytes) text += ",0-999";
  absl::StatusOr<ArrayRange> r = ParseArrayRange(text);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("array: "));
  EXPECT_THAT(r.status().message(), HasSubstr("above the 256 bytes"));
}

TEST(JobArrayTest, ParsesSlurmsSyntax) {
  absl::StatusOr<ArrayRange> r = ParseArrayRange("0-3%2");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->indices, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(r->throttle, 2);
  r = ParseArrayRange("1,3,5-7");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->indices, ElementsAre(1, 3, 5, 6, 7));
  EXPECT_EQ(r->throttle, 0);
  r = ParseArrayRange("0-15:5");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->indices, ElementsAre(0, 5, 10, 15));
  r = ParseArrayRange("4,4,2");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->indices, ElementsAre(2, 4));
}

TEST(JobArrayTest, RefusesWhatIsNotAnArrayNamingWhy) {
  EXPECT_THAT(ParseArrayRange("").status().message(), HasSubstr("names no index"));
  EXPECT_THAT(ParseArrayRange("5-2").status().message(), HasSubstr("runs backwards: '5-2'"));
  EXPECT_THAT(ParseArrayRange("a-b").status().message(), HasSubstr("not an index or a range: 'a-b'"));
  EXPECT_THAT(ParseArrayRange("-1").status().message(), HasSubstr("not an index or a range"));
  EXPECT_THAT(ParseArrayRange("0-3%0").status().message(), HasSubstr("%N that is not a positive number"));
  EXPECT_THAT(ParseArrayRange("0-9:0").status().message(), HasSubstr("step that is not a positive number"));
  EXPECT_THAT(ParseArrayRange("0-1000").status().message(),
              HasSubstr("more than 1000 elements, the most one array may have"));
  EXPECT_THAT(ParseArrayRange("1000000").status().message(), HasSubstr("index above 999999"));
  EXPECT_THAT(ParseArrayRange("0-").status().message(), HasSubstr("array: '0-'"));
}

TEST(JobArrayTest, SpecFieldsAreParsed) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(
      "name: j\nhold: true\narray: 0-9%3\ndependencies: {afterOk: [a, b], afterAny: c}\n" + std::string(kReplicas),
      UnboundedLimits());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->hold());
  EXPECT_EQ(spec->array(), "0-9%3");
  EXPECT_THAT(spec->dependencies().after_ok(), ElementsAre("a", "b"));
  EXPECT_THAT(spec->dependencies().after_any(), ElementsAre("c"));
}

TEST(JobArrayTest, SpecProblemsNameTheirField) {
  EXPECT_THAT(Refusal("hold: maybe\n"), HasSubstr("hold:"));
  EXPECT_THAT(Refusal("array: 3-1\n"), HasSubstr("array: '3-1' has a range that runs backwards"));
  EXPECT_THAT(Refusal("dependencies: {afterOk: [Bad_Name]}\n"),
              HasSubstr("dependencies.afterOk[0]: 'Bad_Name' is not a job name"));
  EXPECT_THAT(Refusal("dependencies: {afterAll: [a]}\n"), HasSubstr("dependencies.afterAll: unknown field"));
  EXPECT_THAT(Refusal("dependencies: [a]\n"), HasSubstr("dependencies"));
  EXPECT_THAT(Refusal("dependencies: {afterAny: [[a]]}\n"), HasSubstr("dependencies.afterAny[0]: must be a string"));
}

TEST(JobArrayTest, ElementNamesMustFitTheNameRule) {
  std::string long_name(60, 'a');
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpec("name: " + long_name + "\narray: 0-100\n" + std::string(kReplicas), UnboundedLimits());
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("name: its array's element names (" + long_name + "-100)"));
}

TEST(JobArrayTest, ReasonsNameWhatTheJobWaitsFor) {
  EXPECT_EQ(HeldReason("j"), "held (trainyard release j)");
  EXPECT_EQ(WaitingForReason("a", true), "waiting for job a (after-ok)");
  EXPECT_EQ(WaitingForReason("a", false), "waiting for job a (after-any)");
  EXPECT_THAT(DependencyFailedMessage("a", "FAILED"), HasSubstr("dependency a ended FAILED"));
  EXPECT_EQ(ArrayElementName("sweep", 3), "sweep-3");
}

}  // namespace
}  // namespace trainyard::api
