// GateBook alone: which jobs are gated, how a gate is judged, and which
// gated jobs a job's end wakes.
#include "server/control/gate_book.h"

#include <map>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/job_rt.h"

namespace trainyard::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class GateBookTest : public ::testing::Test {
 protected:
  JobRt& Add(const std::string& name, uint64_t id) {
    auto job = std::make_unique<JobRt>();
    job->rec.set_name(name);
    job->rec.set_id(id);
    job->rec.set_state(v1::JOB_QUEUED);
    JobRt& out = *job;
    jobs_[name] = std::move(job);
    return out;
  }
  // `job` waits for the job named `dep` (after-ok or after-any), resolved
  // now as a submission resolves it.
  void DependOn(JobRt& job, const std::string& dep, bool after_ok) {
    auto* deps = job.rec.mutable_spec()->mutable_dependencies();
    (after_ok ? deps->add_after_ok() : deps->add_after_any())->assign(dep);
    job.rec.clear_resolved_dependencies();
    book_.ResolveDependencies(job.rec.spec(), &job.rec);
  }
  GateBook::Gate GateOf(const JobRt& job) {
    std::map<std::string, int> active;
    return book_.GateOf(job, &active);
  }

  JobMap jobs_;
  GateBook book_{jobs_};
};

TEST_F(GateBookTest, AQueuedJobIsGatedByAHoldADependencyOrAThrottleUnlessItsGateOpenedOrItWasPlaced) {
  v1::JobRecord rec;
  rec.set_state(v1::JOB_QUEUED);
  EXPECT_FALSE(GateBook::Gated(rec));
  rec.set_held(true);
  EXPECT_TRUE(GateBook::Gated(rec));
  rec.set_held(false);
  rec.mutable_spec()->mutable_dependencies()->add_after_any("prep");
  EXPECT_TRUE(GateBook::Gated(rec));
  rec.set_gate_open(true);
  EXPECT_FALSE(GateBook::Gated(rec)) << "once open, never gated again";
  rec.set_gate_open(false);
  rec.add_tasks()->set_node("n1");
  EXPECT_FALSE(GateBook::Gated(rec)) << "placed before a restart: it passed its gate";
  v1::JobRecord element;
  element.set_state(v1::JOB_QUEUED);
  element.set_array_throttle(2);
  EXPECT_TRUE(GateBook::Gated(element));
}

TEST_F(GateBookTest, ADependencyIsJudgedByHowItEndedByIdEvenOnceItsNameIsTaken) {
  Add("prep", 1);
  JobRt& train = Add("train", 2);
  JobRt& report = Add("report", 3);
  DependOn(train, "prep", /*after_ok=*/true);
  DependOn(report, "prep", /*after_ok=*/false);

  GateBook::Gate g = GateOf(train);
  EXPECT_EQ(g.kind, GateBook::Gate::kWait);
  EXPECT_EQ(g.waiting_on, 1u);
  EXPECT_THAT(g.text, HasSubstr("prep"));

  book_.Ended(1, v1::JOB_FAILED, "prep");
  jobs_.erase("prep");
  Add("prep", 9);  // a new job takes the name: the dependency is still job 1
  g = GateOf(train);
  EXPECT_EQ(g.kind, GateBook::Gate::kFail) << "after-ok, and it failed";
  EXPECT_THAT(g.text, HasSubstr("prep"));
  EXPECT_EQ(GateOf(report).kind, GateBook::Gate::kOpen) << "after-any: any end will do";
}

TEST_F(GateBookTest, AJobsEndWakesOnlyTheJobsWaitingForItAndItsArraysThrottledElements) {
  JobRt& prep = Add("prep", 1);
  JobRt& train = Add("train", 2);
  JobRt& idle = Add("idle", 3);
  book_.Keep(train.rec);
  book_.Keep(idle.rec);
  EXPECT_THAT(book_.TakeRecheck(), ElementsAre(2u, 3u)) << "new gated jobs are looked at once";
  EXPECT_FALSE(book_.RecheckDue());
  book_.WaitOn(1, 2);
  EXPECT_TRUE(book_.Wake(prep.rec));
  EXPECT_THAT(book_.TakeRecheck(), ElementsAre(2u)) << "only the job waiting for prep";
  EXPECT_FALSE(book_.Wake(prep.rec)) << "woken once";

  JobRt& e0 = Add("sweep-0", 10);
  e0.rec.set_array_job("sweep");
  book_.Throttle("sweep", 11);
  book_.Throttle("sweep", 12);
  EXPECT_TRUE(book_.Wake(e0.rec));
  EXPECT_THAT(book_.TakeRecheck(), ElementsAre(11u, 12u));
  book_.Ungate(3);
  EXPECT_EQ(book_.GatedName(3), nullptr);
  ASSERT_NE(book_.GatedName(2), nullptr);
  EXPECT_EQ(*book_.GatedName(2), "train");
  train.rec.set_state(v1::JOB_KILLED);
  book_.Wake(train.rec);
  EXPECT_EQ(book_.GatedName(2), nullptr) << "a job that ended is gated no more";
}

TEST_F(GateBookTest, AnArraysThrottleCountsItsElementsInTheSchedulerOncePerRound) {
  for (int i = 0; i < 3; ++i) {
    JobRt& e = Add("sweep-" + std::to_string(i), 10 + i);
    e.rec.set_array_job("sweep");
    e.rec.set_array_throttle(2);
    book_.AddElement("sweep", e.rec.name());
  }
  jobs_["sweep-0"]->in_scheduler = true;
  jobs_["sweep-1"]->in_scheduler = true;
  std::map<std::string, int> active;
  GateBook::Gate g = book_.GateOf(*jobs_["sweep-2"], &active);
  EXPECT_EQ(g.kind, GateBook::Gate::kWait);
  EXPECT_TRUE(g.throttled);
  EXPECT_EQ(active["sweep"], 2);
  jobs_["sweep-1"]->rec.set_state(v1::JOB_SUCCEEDED);
  EXPECT_EQ(book_.GateOf(*jobs_["sweep-2"], &active).kind, GateBook::Gate::kWait) << "counted once per round";
  active.clear();
  EXPECT_EQ(book_.GateOf(*jobs_["sweep-2"], &active).kind, GateBook::Gate::kOpen) << "the next round counts again";
}

TEST_F(GateBookTest, AnArrayStandsForItsElementsStillNamedSoAndAnUnknownNameIsAProblem) {
  for (int i = 0; i < 2; ++i) {
    JobRt& e = Add("sweep-" + std::to_string(i), 10 + i);
    e.rec.set_array_job("sweep");
    book_.AddElement("sweep", e.rec.name());
  }
  EXPECT_THAT(book_.DependencyTargets("sweep"), ElementsAre("sweep-0", "sweep-1"));
  jobs_.erase("sweep-1");
  Add("sweep-1", 20);  // deleted, and its name taken by a job of no array
  EXPECT_THAT(book_.DependencyTargets("sweep"), ElementsAre("sweep-0"));
  EXPECT_THAT(book_.DependencyTargets("sweep-0"), ElementsAre("sweep-0"));
  EXPECT_THAT(book_.DependencyTargets("nosuch"), IsEmpty());
  v1::JobSpec spec;
  spec.mutable_dependencies()->add_after_ok("sweep");
  spec.mutable_dependencies()->add_after_any("nosuch");
  EXPECT_THAT(book_.UnknownDependencies(spec),
              ElementsAre("dependencies.afterAny[0]: job 'nosuch' does not exist (trainyard jobs -a lists them)"));
  EXPECT_TRUE(book_.IsArray("sweep"));
  book_.DropArray("sweep");
  EXPECT_FALSE(book_.IsArray("sweep"));
}

}  // namespace
}  // namespace trainyard::server
