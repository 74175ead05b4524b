// The state rules as a table a reader can check against docs/job-spec.md.
#include "api/states.h"

#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

TEST(StatesTest, TerminalStatesAreTheThreeEnds) {
  for (v1::JobState s : {v1::JOB_SUCCEEDED, v1::JOB_FAILED, v1::JOB_KILLED}) EXPECT_TRUE(IsTerminal(s));
  for (v1::JobState s : {v1::JOB_QUEUED, v1::JOB_SCHEDULED, v1::JOB_STARTING, v1::JOB_RUNNING}) EXPECT_FALSE(IsTerminal(s));
  for (v1::TaskState s : {v1::TASK_SUCCEEDED, v1::TASK_FAILED, v1::TASK_KILLED}) EXPECT_TRUE(IsTerminal(s));
  for (v1::TaskState s : {v1::TASK_PENDING, v1::TASK_LAUNCHING, v1::TASK_RUNNING, v1::TASK_RESTARTING}) {
    EXPECT_FALSE(IsTerminal(s));
  }
  EXPECT_STREQ(JobStateName(v1::JOB_STARTING), "STARTING");
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

}  // namespace
}  // namespace trainyard::api
