// The state rules as a table a reader can check against docs/job-spec.md.
#include "api/states.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(StatesTest, TerminalStatesAreTheEnds) {
  for (v1::JobState s : {v1::JOB_SUCCEEDED, v1::JOB_FAILED, v1::JOB_KILLED, v1::JOB_DEADLINE_EXCEEDED}) {
    EXPECT_TRUE(IsTerminal(s));
  }
  for (v1::JobState s : {v1::JOB_QUEUED, v1::JOB_SCHEDULED, v1::JOB_STARTING, v1::JOB_RUNNING}) EXPECT_FALSE(IsTerminal(s));
  for (v1::TaskState s : {v1::TASK_SUCCEEDED, v1::TASK_FAILED, v1::TASK_KILLED}) EXPECT_TRUE(IsTerminal(s));
  for (v1::TaskState s : {v1::TASK_PENDING, v1::TASK_LAUNCHING, v1::TASK_RUNNING, v1::TASK_RESTARTING}) {
    EXPECT_FALSE(IsTerminal(s));
  }
  EXPECT_STREQ(JobStateName(v1::JOB_STARTING), "STARTING");
  EXPECT_STREQ(JobStateName(v1::JOB_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_STREQ(TaskStateName(v1::TASK_RESTARTING), "RESTARTING");
}

TEST(StatesTest, JobTransitionsFollowTheLifeOfAJob) {
  EXPECT_TRUE(IsLegalTransition(v1::JOB_QUEUED, v1::JOB_SCHEDULED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_SCHEDULED, v1::JOB_STARTING));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_STARTING, v1::JOB_RUNNING));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_RUNNING, v1::JOB_QUEUED)) << "preempted";
  EXPECT_TRUE(IsLegalTransition(v1::JOB_QUEUED, v1::JOB_KILLED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_RUNNING, v1::JOB_SUCCEEDED));
  EXPECT_FALSE(IsLegalTransition(v1::JOB_QUEUED, v1::JOB_RUNNING)) << "never placed";
  EXPECT_FALSE(IsLegalTransition(v1::JOB_SCHEDULED, v1::JOB_RUNNING)) << "through STARTING";
  EXPECT_FALSE(IsLegalTransition(v1::JOB_SUCCEEDED, v1::JOB_FAILED)) << "an end is final";
  EXPECT_FALSE(IsLegalTransition(v1::JOB_KILLED, v1::JOB_QUEUED));
  EXPECT_TRUE(IsLegalTransition(v1::JOB_KILLED, v1::JOB_KILLED)) << "no change is no transition";
  EXPECT_TRUE(IsLegalTransition(v1::JOB_RUNNING, v1::JOB_DEADLINE_EXCEEDED)) << "past its activeDeadline";
  EXPECT_TRUE(IsLegalTransition(v1::JOB_QUEUED, v1::JOB_DEADLINE_EXCEEDED)) << "requeued after it started, then past it";
  EXPECT_FALSE(IsLegalTransition(v1::JOB_DEADLINE_EXCEEDED, v1::JOB_QUEUED)) << "an end is final";
  EXPECT_FALSE(IsLegalTransition(v1::JOB_SUCCEEDED, v1::JOB_DEADLINE_EXCEEDED));
}

TEST(StatesTest, EveryStateOfTheEnumIsListedAndTheFinishedOnesAreTheTerminalOnes) {
  std::vector<v1::JobState> finished;
  for (int n = v1::JobState_MIN; n <= v1::JobState_MAX; ++n) {
    if (!v1::JobState_IsValid(n) || n == v1::JOB_STATE_UNSPECIFIED) continue;
    auto s = static_cast<v1::JobState>(n);
    EXPECT_NE(std::find(JobStates().begin(), JobStates().end(), s), JobStates().end()) << JobStateName(s);
    EXPECT_STRNE(JobStateName(s), "UNKNOWN");
    if (IsTerminal(s)) finished.push_back(s);
  }
  EXPECT_EQ(JobStates().size(), static_cast<size_t>(v1::JobState_MAX));
  EXPECT_EQ(FinishedJobStates(), finished);
}

TEST(StatesTest, TaskTransitionsFollowTheLifeOfATask) {
  EXPECT_TRUE(IsLegalTransition(v1::TASK_PENDING, v1::TASK_LAUNCHING));
  EXPECT_TRUE(IsLegalTransition(v1::TASK_LAUNCHING, v1::TASK_RUNNING));
  EXPECT_TRUE(IsLegalTransition(v1::TASK_RUNNING, v1::TASK_RESTARTING));
  EXPECT_TRUE(IsLegalTransition(v1::TASK_RESTARTING, v1::TASK_RUNNING));
  EXPECT_TRUE(IsLegalTransition(v1::TASK_RUNNING, v1::TASK_LAUNCHING)) << "moved off a lost node";
  EXPECT_TRUE(IsLegalTransition(v1::TASK_KILLED, v1::TASK_PENDING)) << "its job requeued";
  EXPECT_TRUE(IsLegalTransition(v1::TASK_PENDING, v1::TASK_KILLED)) << "killed before placement";
  EXPECT_FALSE(IsLegalTransition(v1::TASK_PENDING, v1::TASK_RUNNING)) << "never launched";
  EXPECT_FALSE(IsLegalTransition(v1::TASK_PENDING, v1::TASK_RESTARTING));
  EXPECT_FALSE(IsLegalTransition(v1::TASK_SUCCEEDED, v1::TASK_RUNNING)) << "an end is final";
  EXPECT_FALSE(IsLegalTransition(v1::TASK_FAILED, v1::TASK_LAUNCHING));
}

TEST(StatesTest, AStateAsAPersonWritesItAndWhoHoldsAPlace) {
  EXPECT_EQ(ParseJobState("running"), v1::JOB_RUNNING);
  EXPECT_EQ(ParseJobState("DEADLINE_EXCEEDED"), v1::JOB_DEADLINE_EXCEEDED);
  EXPECT_EQ(ParseJobState("job_failed"), v1::JOB_FAILED);
  EXPECT_EQ(ParseJobState("done"), std::nullopt);
  EXPECT_EQ(ParseJobState(""), std::nullopt);
  EXPECT_TRUE(HoldsPlace(v1::TASK_LAUNCHING));
  EXPECT_TRUE(HoldsPlace(v1::TASK_RESTARTING));
  EXPECT_FALSE(HoldsPlace(v1::TASK_PENDING));
  EXPECT_FALSE(HoldsPlace(v1::TASK_KILLED));
}

}  // namespace
}  // namespace trainyard::api
