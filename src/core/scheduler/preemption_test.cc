// Priority preemption, grace deadlines, and no starvation of large gangs.
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/scheduler/scheduler.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using testing::EightGpuNode;
using testing::MakeJob;
using testing::PlacementOf;
using testing::ReasonOf;
using testing::T;

std::unique_ptr<Scheduler> MakeScheduler(int nodes, SchedulerOptions opt = {}) {
  auto s = Scheduler::Create(opt).value();
  for (int i = 0; i < nodes; ++i) EXPECT_TRUE(s->AddNode(EightGpuNode(i)).ok());
  return s;
}

std::set<std::string> Victims(const Decisions& d) {
  std::set<std::string> out;
  for (const Preemption& p : d.preemptions) out.insert(p.victim_job_id);
  return out;
}

// A victim holding GPUs gone out of service under it (one found faulty, one
// cordoned: excluded while held) is tried and put back without harm; the
// production job is placed only on GPUs in service.
TEST(PreemptionTest, AVictimHoldingExcludedGpusIsTriedAndPutBack) {
  auto s = MakeScheduler(1);
  ASSERT_TRUE(s->AddJob(MakeJob("ptr", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(10));
  ASSERT_TRUE(s->SetExcludedGpus("node-0", GpuSet::Parse("2,5").value()).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 4, .priority = PriorityClass::kProduction, .submit = 20})).ok());
  Decisions d = s->Schedule(T(30));  // the trial releases and restores ptr's tasks
  EXPECT_THAT(Victims(d), ::testing::ElementsAre("ptr"));
  const NodeState& node = s->state().node(*s->state().FindNode("node-0"));
  EXPECT_EQ(node.free.gpus, 0);
  ASSERT_TRUE(s->RequeueJob("ptr").ok());
  EXPECT_EQ(GpuSet(node.free.gpu_mask).ToString(), "0-1,3-4,6-7") << "the excluded GPUs stay out";
  d = s->Schedule(T(40));
  const JobPlacement* p = PlacementOf(d, "prod");
  ASSERT_NE(p, nullptr);
  for (const auto& t : p->tasks) EXPECT_EQ(t.allocation.gpu_mask & 0b100100u, 0u);
}

TEST(PreemptionTest, OnlyStrictlyLowerPriorityVictimsAndTheFewest) {
  auto s = MakeScheduler(2);
  // node-0: one 8-GPU ptr job. node-1: eight 1-GPU ptr jobs... placed in
  // this order, plus iteration work that must never be touched.
  ASSERT_TRUE(s->AddJob(MakeJob("ptr-big", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(s->AddJob(MakeJob(absl::StrCat("ptr-small-", i),
                                  {.gpus = 1, .priority = PriorityClass::kPtr, .submit = 1}))
                    .ok());
  }
  s->Schedule(T(10));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 20}))
                  .ok());
  Decisions d = s->Schedule(T(30));
  EXPECT_THAT(Victims(d), ::testing::ElementsAre("ptr-big"));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].for_job_id, "prod");
  EXPECT_EQ(d.preemptions[0].reason, "preempted by production job prod (priority)");
  EXPECT_EQ(d.preemptions[0].grace_deadline, T(60));
  const std::string victim_node = d.preemptions[0].tasks[0].node;
  EXPECT_EQ(ReasonOf(d, "prod"),
            "waiting for 1 preempted job to stop (grace until 1970-01-01T00:01:00Z)");
  // Nothing else is preempted while the victim checkpoints.
  d = s->Schedule(T(40));
  EXPECT_TRUE(d.preemptions.empty());
  // The victim stops; the production job takes its node, the victim waits.
  ASSERT_TRUE(s->RequeueJob("ptr-big").ok());
  d = s->Schedule(T(50));
  ASSERT_NE(PlacementOf(d, "prod"), nullptr);
  EXPECT_EQ(PlacementOf(d, "prod")->tasks[0].node, victim_node);
  EXPECT_NE(ReasonOf(d, "ptr-big"), "");
}

TEST(PreemptionTest, NeverPreemptsEqualOrHigherPriority) {
  auto s = MakeScheduler(1);
  ASSERT_TRUE(s->AddJob(MakeJob("iter", {.gpus = 8})).ok());
  s->Schedule(T(1));
  ASSERT_TRUE(s->AddJob(MakeJob("iter-2", {.gpus = 8, .submit = 2})).ok());
  ASSERT_TRUE(
      s->AddJob(MakeJob("ptr", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 3})).ok());
  Decisions d = s->Schedule(T(4));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(ReasonOf(d, "iter-2"), "needs 8 GPUs on one node; the most free on one node is 0 (node-0)");
}

TEST(PreemptionTest, AGangVictimGoesWhole) {
  auto s = MakeScheduler(2);
  ASSERT_TRUE(s->AddJob(MakeJob("ptr-gang", {.tasks = 4, .gpus = 4,
                                             .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(1));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 4, .priority = PriorityClass::kProduction,
                                         .submit = 2})).ok());
  Decisions d = s->Schedule(T(3));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim_job_id, "ptr-gang");
  EXPECT_EQ(d.preemptions[0].tasks.size(), 4u) << "every task of the gang is named";
}

TEST(PreemptionTest, PrefersLessGpuTimeLostAmongEquals) {
  auto s = MakeScheduler(2);
  ASSERT_TRUE(s->AddJob(MakeJob("old", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(0));
  ASSERT_TRUE(
      s->AddJob(MakeJob("young", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 50}))
          .ok());
  s->Schedule(T(100));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 110})).ok());
  Decisions d = s->Schedule(T(120));
  EXPECT_THAT(Victims(d), ::testing::ElementsAre("young"));
}

TEST(PreemptionTest, DisabledPreemptionOnlyWaits) {
  auto s = MakeScheduler(1, SchedulerOptions{.enable_preemption = false});
  ASSERT_TRUE(s->AddJob(MakeJob("ptr", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(1));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 2})).ok());
  EXPECT_TRUE(s->Schedule(T(3)).preemptions.empty());
}

JobRequest Checkpointing(JobRequest job) {
  job.checkpoints = true;
  return job;
}

TEST(PreemptionTest, AJobYoungerThanTheMinimumRunTimeIsNotAVictimAndTheReasonSaysUntilWhen) {
  auto s = MakeScheduler(1, SchedulerOptions{.preemption_min_runtime = absl::Seconds(60)});
  ASSERT_TRUE(s->AddJob(MakeJob("ptr", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  ASSERT_NE(PlacementOf(s->Schedule(T(100)), "ptr"), nullptr);
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 105})).ok());
  Decisions d = s->Schedule(T(110));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(ReasonOf(d, "prod"),
            "preemption possible at 1970-01-01T00:02:40Z: job ptr started 10 s ago, below the "
            "60 s minimum run time");
  d = s->Schedule(T(159));
  EXPECT_TRUE(d.preemptions.empty());
  // Once its run is 60 s old, it is chosen as before.
  d = s->Schedule(T(160));
  EXPECT_THAT(Victims(d), ::testing::ElementsAre("ptr"));
  EXPECT_EQ(ReasonOf(d, "prod"),
            "waiting for 1 preempted job to stop (grace until 1970-01-01T00:03:10Z)");
}

TEST(PreemptionTest, TheMinimumRunTimeCountsFromTheCurrentRunAfterARequeue) {
  auto s = MakeScheduler(1, SchedulerOptions{.preemption_min_runtime = absl::Seconds(60)});
  ASSERT_TRUE(s->AddJob(MakeJob("ptr", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(0));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 100})).ok());
  EXPECT_THAT(Victims(s->Schedule(T(100))), ::testing::ElementsAre("ptr"));
  ASSERT_TRUE(s->RequeueJob("ptr").ok());
  ASSERT_NE(PlacementOf(s->Schedule(T(110)), "prod"), nullptr);
  ASSERT_TRUE(s->RemoveJob("prod").ok());
  ASSERT_NE(PlacementOf(s->Schedule(T(200)), "ptr"), nullptr);  // runs again from t=200
  ASSERT_TRUE(s->AddJob(MakeJob("prod-2", {.gpus = 8, .priority = PriorityClass::kProduction,
                                           .submit = 230})).ok());
  Decisions d = s->Schedule(T(230));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(ReasonOf(d, "prod-2"),
            "preemption possible at 1970-01-01T00:04:20Z: job ptr started 30 s ago, below the "
            "60 s minimum run time");
}

TEST(PreemptionTest, WithSeveralYoungVictimsTheReasonNamesTheYoungest) {
  auto s = MakeScheduler(2, SchedulerOptions{.preemption_min_runtime = absl::Seconds(60)});
  ASSERT_TRUE(s->AddJob(MakeJob("ptr-1", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(100));
  ASSERT_TRUE(
      s->AddJob(MakeJob("ptr-2", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 100}))
          .ok());
  s->Schedule(T(110));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.tasks = 2, .gpus = 8,
                                         .priority = PriorityClass::kProduction, .submit = 120}))
                  .ok());
  Decisions d = s->Schedule(T(130));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(ReasonOf(d, "prod"),
            "preemption possible at 1970-01-01T00:02:50Z: 2 jobs it would preempt, the youngest "
            "ptr-2, started 20 s ago, below the 60 s minimum run time");
  EXPECT_TRUE(s->Schedule(T(165)).preemptions.empty()) << "ptr-1 is old enough, ptr-2 not yet";
  EXPECT_THAT(Victims(s->Schedule(T(170))), ::testing::ElementsAre("ptr-1", "ptr-2"));
}

TEST(PreemptionTest, AnOlderVictimIsTakenWhenTheCheaperOneIsTooYoung) {
  auto s = MakeScheduler(2, SchedulerOptions{.preemption_min_runtime = absl::Seconds(60)});
  ASSERT_TRUE(s->AddJob(MakeJob("old", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(0));
  ASSERT_TRUE(
      s->AddJob(MakeJob("young", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 90}))
          .ok());
  s->Schedule(T(100));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 110})).ok());
  // Without the minimum "young" would go (less GPU-time lost).
  EXPECT_THAT(Victims(s->Schedule(T(120))), ::testing::ElementsAre("old"));
}

TEST(PreemptionTest, TheMinimumRunTimeHoldsForQueueReclaimToo) {
  SchedulerOptions opt{.queue_policy = "capacity",
                       .preemption_min_runtime = absl::Seconds(60)};
  opt.queues.root.children = {
      QueueConfig{.name = "a", .capacity_percent = 50, .max_capacity_percent = 100},
      QueueConfig{.name = "b", .capacity_percent = 50, .max_capacity_percent = 100}};
  opt.queues.reclaim_timeout = absl::Seconds(5);
  auto s = MakeScheduler(1, opt);
  ASSERT_TRUE(s->AddJob(MakeJob("a-1", {.gpus = 4, .queue = "a"})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("a-2", {.gpus = 4, .queue = "a"})).ok());
  s->Schedule(T(0));
  ASSERT_TRUE(s->AddJob(MakeJob("b-1", {.gpus = 4, .queue = "b", .submit = 20})).ok());
  s->Schedule(T(20));
  Decisions d = s->Schedule(T(30));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(ReasonOf(d, "b-1"),
            "preemption possible at 1970-01-01T00:01:00Z: job a-1 started 30 s ago, below the "
            "60 s minimum run time");
  d = s->Schedule(T(60));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].reason, ::testing::HasSubstr("to return resources to queue b"));
}

TEST(PreemptionTest, ANegativeMinimumRunTimeIsRefused) {
  absl::StatusOr<std::unique_ptr<Scheduler>> s =
      Scheduler::Create(SchedulerOptions{.preemption_min_runtime = absl::Seconds(-1)});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("preemption_min_runtime"));
}

TEST(PreemptionTest, AmongEqualVictimsTheOneThatCheckpointsGoes) {
  auto s = MakeScheduler(2);
  // "ckpt" has run longer (more GPU-time to lose), but saves on demand.
  ASSERT_TRUE(
      s->AddJob(Checkpointing(MakeJob("ckpt", {.gpus = 8, .priority = PriorityClass::kPtr})))
          .ok());
  s->Schedule(T(0));
  ASSERT_TRUE(
      s->AddJob(MakeJob("plain", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 50}))
          .ok());
  s->Schedule(T(100));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 110})).ok());
  EXPECT_THAT(Victims(s->Schedule(T(120))), ::testing::ElementsAre("ckpt"));
}

TEST(PreemptionTest, FewerVictimsStillComeBeforeCheckpointing) {
  auto s = MakeScheduler(2);
  ASSERT_TRUE(s->AddJob(MakeJob("plain", {.gpus = 8, .priority = PriorityClass::kPtr})).ok());
  s->Schedule(T(0));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(s->AddJob(Checkpointing(MakeJob(
                              absl::StrCat("ckpt-", i),
                              {.gpus = 4, .priority = PriorityClass::kPtr, .submit = 1})))
                    .ok());
  }
  s->Schedule(T(10));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 20})).ok());
  EXPECT_THAT(Victims(s->Schedule(T(30))), ::testing::ElementsAre("plain"));
}

// A job one more preemption would end (its preemption budget spent) is
// chosen only where nothing else frees the room: here the other job, though
// it checkpoints and has run less, goes; with the other gone too, it does.
TEST(PreemptionTest, AJobAPreemptionWouldEndIsTheLastChoice) {
  auto s = MakeScheduler(2);
  JobRequest last = MakeJob("last", {.gpus = 8, .priority = PriorityClass::kPtr});
  last.last_preemption = true;
  ASSERT_TRUE(s->AddJob(last).ok());
  s->Schedule(T(0));
  ASSERT_TRUE(s->AddJob(Checkpointing(
                            MakeJob("other", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 50})))
                  .ok());
  s->Schedule(T(100));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 110})).ok());
  EXPECT_THAT(Victims(s->Schedule(T(120))), ::testing::ElementsAre("other"));
  ASSERT_TRUE(s->RequeueJob("other").ok());
  s->Schedule(T(130));
  // A second production job finds only "last" to stop: it goes.
  ASSERT_TRUE(s->AddJob(MakeJob("prod-2", {.gpus = 8, .priority = PriorityClass::kProduction,
                                           .submit = 140})).ok());
  EXPECT_THAT(Victims(s->Schedule(T(150))), ::testing::ElementsAre("last"));
  EXPECT_FALSE(s->SetLastPreemption("nobody", true).ok());
}

// A job of CPU tasks whose first role is a small one (the job master the
// server adds first) is counted in its big tasks: it finds its victims.
TEST(PreemptionTest, AJobOfCpuTasksBehindASmallFirstRoleFindsItsVictims) {
  auto s = MakeScheduler(1);  // 64 cores
  JobRequest low = MakeJob("low", {.tasks = 4, .gpus = 0, .priority = PriorityClass::kPtr});
  for (RoleRequest& r : low.roles) r.resource.vcores_milli = 8000;  // 32 cores
  ASSERT_TRUE(s->AddJob(low).ok());
  s->Schedule(T(0));
  JobRequest prod = MakeJob("prod", {.gpus = 0, .priority = PriorityClass::kProduction, .submit = 10});
  prod.roles[0].resource.vcores_milli = 40000;
  RoleRequest master;
  master.name = "jobmaster";
  master.resource = Resource{.memory_mb = 64, .vcores_milli = 50};
  prod.roles.insert(prod.roles.begin(), master);
  ASSERT_TRUE(s->AddJob(prod).ok());
  EXPECT_THAT(Victims(s->Schedule(T(20))), ::testing::ElementsAre("low"));
}

// An elastic job, once stopped, is placed again at once with what is left;
// a whole job waits in the queue. Among equally many victims, the elastic
// one goes first, even where the whole one has run for less time.
TEST(PreemptionTest, AnElasticJobIsChosenBeforeOneThatWouldWaitWhole) {
  auto s = MakeScheduler(2);
  JobRequest elastic = MakeJob("elastic", {.tasks = 4, .gpus = 2, .min_available = 2,
                                           .priority = PriorityClass::kPtr});
  elastic.elastic = true;
  ASSERT_TRUE(s->AddJob(elastic).ok());
  s->Schedule(T(0));
  ASSERT_TRUE(s->AddJob(MakeJob("whole", {.gpus = 8, .priority = PriorityClass::kPtr, .submit = 50})).ok());
  s->Schedule(T(100));
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 4, .priority = PriorityClass::kProduction,
                                         .submit = 110})).ok());
  EXPECT_THAT(Victims(s->Schedule(T(120))), ::testing::ElementsAre("elastic"));
}

struct StreamOutcome {
  bool big_ran = false;
  bool big_reserved = false;
  bool small_waited_behind_big = false;
};

// 4 nodes kept busy by a steady stream of 1- and 2-GPU jobs (each runs
// 20-60 s); a 4 x 8-GPU gang "big-1" arrives at t=1. Simulated for 2000 s.
StreamOutcome RunStream(const SchedulerOptions& opt) {
  StreamOutcome out;
  std::mt19937 rng(7);  // job durations
  auto s = MakeScheduler(4, opt);
  int next = 0;
  std::vector<std::pair<std::string, int>> running;  // id, end time
  auto submit_small = [&](int now) {
    std::string id = absl::StrCat("small-", next++);
    EXPECT_TRUE(s->AddJob(MakeJob(id, {.gpus = 1 + next % 2, .submit = now})).ok());
  };
  for (int i = 0; i < 40; ++i) submit_small(0);
  EXPECT_TRUE(s->AddJob(MakeJob("big-1", {.tasks = 4, .gpus = 8, .submit = 1})).ok());
  for (int now = 2; now < 2000 && !out.big_ran; now += 5) {
    for (auto it = running.begin(); it != running.end();) {
      if (it->second <= now) {
        EXPECT_TRUE(s->RemoveJob(it->first).ok());
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    for (int k = 0; k < 4; ++k) submit_small(now);
    Decisions d = s->Schedule(T(now));
    for (const JobPlacement& p : d.placements) {
      if (p.job_id == "big-1") out.big_ran = true;
      running.emplace_back(p.job_id, now + 20 + static_cast<int>(rng() % 41));
    }
    if (ReasonOf(d, "big-1").rfind("holding a reservation on 4 nodes", 0) == 0) {
      out.big_reserved = true;
    }
    for (const PendingReason& p : d.pending) {
      if (p.reason == "waiting behind reservation for job big-1") {
        out.small_waited_behind_big = true;
      }
    }
  }
  return out;
}

TEST(StarvationTest, LargeGangRunsDespiteAStreamOfSmallJobs) {
  StreamOutcome out = RunStream(SchedulerOptions{.reservation_wait = absl::Seconds(30)});
  EXPECT_TRUE(out.big_ran);
  EXPECT_TRUE(out.big_reserved);
  EXPECT_TRUE(out.small_waited_behind_big);
}

TEST(StarvationTest, WithoutReservationsTheSameStreamStarvesTheGang) {
  StreamOutcome out = RunStream(SchedulerOptions{.reservation_wait = absl::Hours(1000)});
  EXPECT_FALSE(out.big_ran);
}

}  // namespace
}  // namespace trainyard::core
