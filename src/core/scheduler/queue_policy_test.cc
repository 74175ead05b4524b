// Queue policies through the scheduler: FIFO order, Capacity limits,
// lending and reclaim, per-user limits, Fair-DRF shares and min-shares.
#include <algorithm>
#include <map>

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

QueueConfig Leaf(std::string name, double cap, double max, double user_limit = 100,
                 double weight = 1) {
  return QueueConfig{.name = std::move(name),
                     .capacity_percent = cap,
                     .max_capacity_percent = max,
                     .user_limit_percent = user_limit,
                     .weight = weight};
}

std::unique_ptr<Scheduler> QueuePolicyMake(const std::string& policy, std::vector<QueueConfig> leaves,
                                int nodes, absl::Duration reclaim = absl::ZeroDuration()) {
  SchedulerOptions opt{.queue_policy = policy};
  opt.queues.root.children = std::move(leaves);
  opt.queues.reclaim_timeout = reclaim;
  auto s = Scheduler::Create(opt);
  EXPECT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < nodes; ++i) EXPECT_TRUE((*s)->AddNode(EightGpuNode(i)).ok());
  return *std::move(s);
}

// The state's index of queue `name` (it must be known).
int32_t QueueIndex(const ClusterState& state, const std::string& name) {
  const std::vector<std::string>& names = state.queue_names();
  auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<int32_t>(it - names.begin());
}

// Jobs per queue that were placed in `d`.
std::map<std::string, int> PlacedPerQueue(const Decisions& d) {
  std::map<std::string, int> out;
  for (const JobPlacement& p : d.placements) out[p.job_id.substr(0, p.job_id.find('-'))]++;
  return out;
}

void Submit(Scheduler* s, const std::string& queue, int count, int submit, int gpus = 8,
            const std::string& user = "alice") {
  for (int i = 0; i < count; ++i) {
    std::string id = absl::StrCat(queue, "-", user, i, "-", submit);
    ASSERT_TRUE(s->AddJob(MakeJob(id, {.gpus = gpus, .queue = queue, .user = user,
                                       .submit = submit + i}))
                    .ok());
  }
}

TEST(FifoTest, HigherPriorityFirstThenSubmitTime) {
  auto s = QueuePolicyMake("fifo", {Leaf("default", 100, 100)}, 1);
  ASSERT_TRUE(s->AddJob(MakeJob("early", {.gpus = 8, .submit = 0})).ok());
  ASSERT_TRUE(s->AddJob(MakeJob("urgent", {.gpus = 8, .priority = PriorityClass::kProduction,
                                           .submit = 5}))
                  .ok());
  Decisions d = s->Schedule(T(10));
  EXPECT_NE(PlacementOf(d, "urgent"), nullptr);
  EXPECT_EQ(PlacementOf(d, "early"), nullptr);
}

TEST(CapacityTest, UnknownQueueIsRejectedWithTheLeaves) {
  auto s = QueuePolicyMake("capacity", {Leaf("research", 40, 40), Leaf("prod", 60, 100)}, 1);
  EXPECT_EQ(s->AddJob(MakeJob("x", {.queue = "nope"})).message(),
            "job x: queue \"nope\" is not a leaf queue; leaf queues are: research, prod");
}

TEST(CapacityTest, MaxCapacityStopsAQueue) {
  auto s = QueuePolicyMake("capacity", {Leaf("research", 40, 40), Leaf("prod", 60, 100)}, 10);
  Submit(s.get(), "research", 6, 0);
  Decisions d = s->Schedule(T(100));
  EXPECT_EQ(PlacedPerQueue(d)["research"], 4);
  EXPECT_EQ(ReasonOf(d, "research-alice4-0"), "queue research is at its max-capacity 40%");
}

TEST(CapacityTest, IdleCapacityIsLentAndTakenBack) {
  auto s = QueuePolicyMake("capacity", {Leaf("research", 40, 100), Leaf("prod", 60, 100)}, 10,
                absl::Seconds(60));
  Submit(s.get(), "research", 10, 0);
  EXPECT_EQ(PlacedPerQueue(s->Schedule(T(100)))["research"], 10) << "prod is idle: lent";
  Submit(s.get(), "prod", 6, 200);
  Decisions d = s->Schedule(T(210));
  EXPECT_TRUE(d.preemptions.empty()) << "reclaim waits for the timeout";
  d = s->Schedule(T(300));
  ASSERT_FALSE(d.preemptions.empty());
  for (const Preemption& p : d.preemptions) {
    EXPECT_EQ(p.victim_job_id.substr(0, 8), "research");
    EXPECT_THAT(p.reason, ::testing::StartsWith("preempted to return resources to queue prod"));
  }
  int reclaimed = 0;
  for (int round = 0; round < 4; ++round) {
    for (const Preemption& p : d.preemptions) ASSERT_TRUE(s->RequeueJob(p.victim_job_id).ok());
    reclaimed += static_cast<int>(d.preemptions.size());
    d = s->Schedule(T(310 + round));
  }
  EXPECT_EQ(reclaimed, 6) << "exactly prod's guarantee is taken back";
  EXPECT_EQ(s->state().QueueUsed(QueueIndex(s->state(), "prod")).gpus, 48);
}

TEST(CapacityTest, QueueFurthestBelowItsGuaranteeGoesFirst) {
  auto s = QueuePolicyMake("capacity", {Leaf("a", 50, 100), Leaf("b", 50, 100)}, 2);
  Submit(s.get(), "a", 4, 0);
  Submit(s.get(), "b", 4, 10);
  std::map<std::string, int> placed = PlacedPerQueue(s->Schedule(T(20)));
  EXPECT_EQ(placed["a"], 1);
  EXPECT_EQ(placed["b"], 1);
}

TEST(CapacityTest, PerUserLimitWithinAQueue) {
  auto s = QueuePolicyMake("capacity", {Leaf("research", 40, 40, /*user_limit=*/50), Leaf("prod", 60, 100)},
                10);
  Submit(s.get(), "research", 3, 0, 8, "alice");
  Submit(s.get(), "research", 1, 10, 8, "bob");
  Decisions d = s->Schedule(T(20));
  EXPECT_EQ(PlacedPerQueue(d)["research"], 3);
  EXPECT_EQ(ReasonOf(d, "research-alice2-0"),
            "user alice is at the user limit of queue research (50% of its max-capacity)");
  EXPECT_NE(PlacementOf(d, "research-bob0-10"), nullptr);
}

TEST(CapacityTest, HierarchicalMaxCapacityOfAParent) {
  SchedulerOptions opt{.queue_policy = "capacity"};
  QueueConfig org{.name = "org", .capacity_percent = 50, .max_capacity_percent = 50};
  org.children = {Leaf("team1", 50, 100), Leaf("team2", 50, 100)};
  opt.queues.root.children = {org, Leaf("other", 50, 100)};
  auto s = Scheduler::Create(opt).value();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(s->AddNode(EightGpuNode(i)).ok());
  Submit(s.get(), "team1", 3, 0);
  Decisions d = s->Schedule(T(10));
  EXPECT_EQ(PlacedPerQueue(d)["team1"], 2);
  EXPECT_EQ(ReasonOf(d, "team1-alice2-0"), "queue org is at its max-capacity 50%");
}

TEST(FairTest, EqualWeightsShareEqually) {
  auto s = QueuePolicyMake("fair", {Leaf("a", 0, 100), Leaf("b", 0, 100)}, 4);
  Submit(s.get(), "a", 4, 0);
  Submit(s.get(), "b", 4, 100);
  std::map<std::string, int> placed = PlacedPerQueue(s->Schedule(T(200)));
  EXPECT_EQ(placed["a"], 2);
  EXPECT_EQ(placed["b"], 2);
}

TEST(FairTest, WeightsSplitTheCluster) {
  auto s = QueuePolicyMake("fair", {Leaf("a", 0, 100, 100, 3), Leaf("b", 0, 100, 100, 1)}, 4);
  Submit(s.get(), "a", 4, 100);
  Submit(s.get(), "b", 4, 0);
  std::map<std::string, int> placed = PlacedPerQueue(s->Schedule(T(200)));
  EXPECT_EQ(placed["a"], 3);
  EXPECT_EQ(placed["b"], 1);
}

TEST(FairTest, DominantShareCountsTheScarcestResource) {
  // a's jobs are memory-heavy (dominant: memory), b's GPU-heavy; DRF
  // equalises dominant shares, not GPU counts.
  auto s = QueuePolicyMake("fair", {Leaf("a", 0, 100), Leaf("b", 0, 100)}, 2);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s->AddJob(MakeJob(absl::StrCat("a-", i),
                                  {.gpus = 1, .queue = "a", .submit = i, .memory_mb = 256 * 1024}))
                    .ok());
    ASSERT_TRUE(s->AddJob(MakeJob(absl::StrCat("b-", i), {.gpus = 4, .queue = "b", .submit = i}))
                    .ok());
  }
  std::map<std::string, int> placed = PlacedPerQueue(s->Schedule(T(10)));
  // Each a job takes 1/4 of the cluster's memory; each b job 1/4 of its GPUs.
  EXPECT_EQ(placed["a"], 2);
  EXPECT_EQ(placed["b"], 2);
}

TEST(FairTest, MinShareGoesFirst) {
  std::vector<QueueConfig> leaves = {Leaf("a", 0, 100), Leaf("b", 0, 100)};
  leaves[1].min_share.gpus = 24;
  auto s = QueuePolicyMake("fair", leaves, 4);
  Submit(s.get(), "a", 4, 0);
  Submit(s.get(), "b", 4, 100);
  std::map<std::string, int> placed = PlacedPerQueue(s->Schedule(T(200)));
  EXPECT_EQ(placed["b"], 3);
  EXPECT_EQ(placed["a"], 1);
}

TEST(FairTest, StarvedQueuePreemptsTheQueueAboveItsShareAfterTheTimeout) {
  auto s = QueuePolicyMake("fair", {Leaf("a", 0, 100), Leaf("b", 0, 100)}, 2, absl::Seconds(30));
  Submit(s.get(), "a", 2, 0);
  EXPECT_EQ(PlacedPerQueue(s->Schedule(T(10)))["a"], 2);
  Submit(s.get(), "b", 1, 20);
  EXPECT_TRUE(s->Schedule(T(25)).preemptions.empty());
  Decisions d = s->Schedule(T(60));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim_job_id.substr(0, 2), "a-");
  EXPECT_EQ(d.preemptions[0].reason,
            "preempted to return resources to queue b (below its share) for job b-alice0-20");
}

TEST(QueuePolicyTest, BadConfigIsRejectedByName) {
  SchedulerOptions opt{.queue_policy = "capacity"};
  opt.queues.root.children = {Leaf("a", 70, 100), Leaf("b", 40, 100)};
  EXPECT_EQ(Scheduler::Create(opt).status().message(),
            "queue root: children's capacity_percent add up to 110, more than 100");
  opt.queue_policy = "lottery";
  EXPECT_EQ(Scheduler::Create(opt).status().message(),
            "queue policy \"lottery\" is unknown; use fifo, capacity or fair");
  opt.queue_policy = "fifo";
  opt.placement = "random";
  EXPECT_EQ(Scheduler::Create(opt).status().message(),
            "placement policy \"random\" is unknown; use fragmentation, topology or spread");
}

}  // namespace
}  // namespace trainyard::core

namespace trainyard::core {
namespace {

TEST(CapacityTest, ReclaimTakesBackOnlyWhatIsOwedEvenInOneRound) {
  auto s = QueuePolicyMake("capacity", {Leaf("research", 50, 100), Leaf("prod", 50, 100)}, 4,
                absl::Seconds(10));
  Submit(s.get(), "research", 4, 0);
  EXPECT_EQ(PlacedPerQueue(s->Schedule(T(1)))["research"], 4);
  Submit(s.get(), "prod", 4, 2);
  s->Schedule(T(3));
  Decisions d = s->Schedule(T(20));
  EXPECT_EQ(d.preemptions.size(), 2u) << "prod is owed 50%: two of research's four nodes";
}

}  // namespace
}  // namespace trainyard::core
