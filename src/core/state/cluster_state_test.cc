// ClusterState updates: tasks finishing, requeue, excluded GPUs, errors.
#include "core/state/cluster_state.h"

#include "gtest/gtest.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using testing::EightGpuNode;
using testing::MakeJob;
using testing::T;

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    s_ = Scheduler::Create({}).value();
    ASSERT_TRUE(s_->AddNode(EightGpuNode(0)).ok());
  }
  const NodeState& Node0() { return s_->state().node(*s_->state().FindNode("node-0")); }
  std::unique_ptr<Scheduler> s_;
};

TEST_F(ClusterStateTest, TaskFinishedFreesOnlyThatTask) {
  ASSERT_TRUE(s_->AddJob(MakeJob("j", {.tasks = 2, .gpus = 4})).ok());
  s_->Schedule(T(1));
  EXPECT_EQ(Node0().free.gpus, 0);
  ASSERT_TRUE(s_->TaskFinished("j", "worker", 1).ok());
  EXPECT_EQ(Node0().free.gpus, 4);
  EXPECT_EQ(s_->TaskFinished("j", "worker", 1).message(), "job j has no running task worker-1");
  EXPECT_EQ(s_->state().Assignments(*s_->state().FindJob("j")).size(), 1u);
}

TEST_F(ClusterStateTest, RequeueKeepsSubmitTimeAndFreesEverything) {
  ASSERT_TRUE(s_->AddJob(MakeJob("j", {.gpus = 8, .submit = 5})).ok());
  EXPECT_EQ(s_->RequeueJob("j").message(), "job j is already pending");
  s_->Schedule(T(10));
  ASSERT_TRUE(s_->RequeueJob("j").ok());
  EXPECT_EQ(Node0().free.gpus, 8);
  const JobState& job = s_->state().job(*s_->state().FindJob("j"));
  EXPECT_EQ(job.phase, JobPhase::kPending);
  EXPECT_EQ(job.request.submit_time, T(5));
  EXPECT_EQ(s_->RemoveJob("nope").message(), "job nope is unknown");
}

TEST_F(ClusterStateTest, ExcludedGpusAreNeverPlaced) {
  ASSERT_TRUE(s_->SetExcludedGpus("node-0", GpuSet::Parse("0-5").value()).ok());
  ASSERT_TRUE(s_->AddJob(MakeJob("j", {.gpus = 2})).ok());
  Decisions d = s_->Schedule(T(1));
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(GpuSet(d.placements[0].tasks[0].allocation.gpu_mask).ToString(), "6-7");
  // A held GPU excluded (found faulty) stays its task's until released,
  // and does not come back then.
  ASSERT_TRUE(s_->SetExcludedGpus("node-0", GpuSet::Parse("7").value()).ok());
  EXPECT_EQ(GpuSet(Node0().free.gpu_mask).ToString(), "0-5");
  ASSERT_TRUE(s_->RemoveJob("j").ok());
  EXPECT_EQ(GpuSet(Node0().free.gpu_mask).ToString(), "0-6");
  EXPECT_EQ(Node0().free.gpus, 7);
  ASSERT_TRUE(s_->SetExcludedGpus("node-0", GpuSet()).ok());
  EXPECT_EQ(Node0().free.gpus, 8);
}

// GPUs that go out of service under tasks (found faulty, cordoned) stay
// theirs: a preemption's trial releases and puts a victim back (WouldFit), a
// task ends, and the GPUs, whole or shared, never come back free.
TEST(ClusterStateExcludedTest, ATasksExcludedGpusComeBackToItAfterATrialButNeverFree) {
  ClusterState st;
  ASSERT_TRUE(st.AddNode(EightGpuNode(0)).ok());
  ASSERT_TRUE(st.AddJob(MakeJob("j", {.tasks = 2, .gpus = 2})).ok());
  JobSlot j = *st.FindJob("j");
  NodeId n = *st.FindNode("node-0");
  st.AllocateTask(j, 0, 0, n, Resource{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 2, .gpu_mask = 0b11});
  st.AllocateTask(j, 0, 1, n, Resource{.memory_mb = 1024, .vcores_milli = 1000, .gpu_mask = 0b100, .gpu_milli = 500});
  ASSERT_TRUE(st.SetExcludedGpus("node-0", GpuSet(0b111)).ok());
  EXPECT_EQ(GpuSet(st.node(n).free.gpu_mask).ToString(), "3-7");
  EXPECT_EQ(st.ReclaimableGpus(n), 0u) << "held, whole and shared";

  std::vector<PlacedTask> saved = st.job(j).tasks;
  st.ReleaseAllTasks(j);  // a trial
  EXPECT_EQ(GpuSet(st.node(n).free.gpu_mask).ToString(), "3-7");
  EXPECT_EQ(st.ReclaimableGpus(n), 0b111u);
  for (const PlacedTask& t : saved) st.AllocateTask(j, t.role, t.index, t.node, t.allocation);  // put back
  EXPECT_EQ(GpuSet(st.node(n).free.gpu_mask).ToString(), "3-7");
  EXPECT_EQ(st.node(n).free.gpus, 5);
  EXPECT_EQ(st.node(n).shared, 0b100u);

  st.ReleaseAllTasks(j, ClusterState::Release::kEnded);
  EXPECT_EQ(GpuSet(st.node(n).free.gpu_mask).ToString(), "3-7");
  EXPECT_EQ(st.node(n).free.gpus, 5);
  EXPECT_EQ(st.node(n).shared, 0u);
  ASSERT_TRUE(st.SetExcludedGpus("node-0", GpuSet()).ok());
  EXPECT_EQ(st.node(n).free.gpus, 8);
}

TEST_F(ClusterStateTest, ATaskAdoptedOnAGpuExcludedSinceKeepsIt) {
  ASSERT_TRUE(s_->SetExcludedGpus("node-0", GpuSet::Parse("3").value()).ok());
  ASSERT_TRUE(s_->AddJob(MakeJob("j", {.gpus = 1})).ok());
  ASSERT_TRUE(s_->MarkRunning("j", T(5)).ok());
  Resource one{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 1, .gpu_mask = 0b1000};
  ASSERT_TRUE(s_->AdoptTask("j", "worker", 0, "node-0", one).ok());
  EXPECT_EQ(GpuSet(Node0().free.gpu_mask).ToString(), "0-2,4-7");
  EXPECT_EQ(Node0().free.gpus, 7);
  ASSERT_TRUE(s_->TaskFinished("j", "worker", 0).ok());
  EXPECT_EQ(GpuSet(Node0().free.gpu_mask).ToString(), "0-2,4-7");
  EXPECT_EQ(Node0().free.gpus, 7);
}

// What ModelFreeShare counts follows every change of a node: placements
// (whole GPUs and shares), their end, excluded GPUs, cordons, removal.
TEST_F(ClusterStateTest, FreeShareIsCountedPerGpuModel) {
  NodeSpec t4 = EightGpuNode(1);
  t4.gpu_model = "T4";
  ASSERT_TRUE(s_->AddNode(t4).ok());
  const ClusterState& st = s_->state();
  auto t4_free = [&] { return st.ModelFreeShare().at(st.node(*st.FindNode("node-1")).gpu_model); };
  EXPECT_EQ(st.FreeShareTotal(), 16000) << "node-0 has no model but counts in the total";
  EXPECT_EQ(t4_free(), 8000);
  JobRequest whole = MakeJob("whole", {.gpus = 3});
  whole.roles[0].gpu_models = {"T4"};
  ASSERT_TRUE(s_->AddJob(whole).ok());
  JobRequest share = MakeJob("share", {.gpus = 0});
  share.roles[0].resource.gpu_milli = 250;
  share.roles[0].gpu_models = {"T4"};
  ASSERT_TRUE(s_->AddJob(share).ok());
  s_->Schedule(T(1));
  EXPECT_EQ(t4_free(), 8000 - 3000 - 250);
  EXPECT_EQ(st.FreeShareTotal(), 16000 - 3250);
  ASSERT_TRUE(s_->TaskFinished("whole", "worker", 0).ok());
  EXPECT_EQ(t4_free(), 8000 - 250);
  ASSERT_TRUE(s_->SetExcludedGpus("node-0", GpuSet::Parse("0-1").value()).ok());
  EXPECT_EQ(st.FreeShareTotal(), 6000 + 8000 - 250);
  ASSERT_TRUE(s_->SetSchedulable("node-1", false).ok());
  EXPECT_EQ(t4_free(), 0) << "a cordoned node gives nothing";
  EXPECT_EQ(st.FreeShareTotal(), 6000);
  ASSERT_TRUE(s_->SetSchedulable("node-1", true).ok());
  EXPECT_EQ(t4_free(), 8000 - 250);
  ASSERT_TRUE(s_->RemoveNode("node-1").ok());
  EXPECT_EQ(st.ModelFreeShare().at(0), 0);
  EXPECT_EQ(st.FreeShareTotal(), 6000);
}

// A queue's GPU shares are kept as tasks are placed and released (its
// QueueUsed counts whole GPUs only).
TEST_F(ClusterStateTest, QueueShareMilliFollowsPlacementsAndReleases) {
  JobRequest a = MakeJob("a", {.tasks = 2, .gpus = 0});
  a.roles[0].resource.gpu_milli = 250;
  ASSERT_TRUE(s_->AddJob(a).ok());
  ASSERT_TRUE(s_->AddJob(MakeJob("whole", {.gpus = 2})).ok());
  s_->Schedule(T(1));
  const ClusterState& st = s_->state();
  int32_t q = st.job(*st.FindJob("a")).queue;
  EXPECT_EQ(st.QueueShareMilli(q), 500);
  EXPECT_EQ(st.QueueUsed(q).gpus, 2);
  ASSERT_TRUE(s_->TaskFinished("a", "worker", 1).ok());
  EXPECT_EQ(st.QueueShareMilli(q), 250);
  ASSERT_TRUE(s_->RequeueJob("a").ok());
  EXPECT_EQ(st.QueueShareMilli(q), 0);
  s_->Schedule(T(2));
  EXPECT_EQ(st.QueueShareMilli(q), 500);
  ASSERT_TRUE(s_->RemoveJob("a").ok());
  EXPECT_EQ(st.QueueShareMilli(q), 0);
}

TEST_F(ClusterStateTest, BadNodesAreRejectedByName) {
  NodeSpec n = EightGpuNode(1);
  n.capacity.gpus = 4;
  EXPECT_EQ(s_->AddNode(n).message(), "node node-1: topology has 8 GPUs but capacity.gpus is 4");
  EXPECT_EQ(s_->AddNode(EightGpuNode(0)).message(), "node node-0 is already known");
  n = EightGpuNode(2);
  n.capacity.memory_mb = -1;
  EXPECT_EQ(n.name, "node-2");
  EXPECT_FALSE(s_->AddNode(n).ok());
  EXPECT_EQ(s_->SetSchedulable("node-9", false).message(), "node node-9 is unknown");
}

// The core is the only code that allocates, so its arithmetic is checked
// where it happens: giving what is not free, or freeing what was never
// held, is a bug in Trainyard and aborts instead of corrupting the counts.
TEST(ClusterStateDeathTest, AllocatingWhatIsNotFreeIsABug) {
  ClusterState st;
  ASSERT_TRUE(st.AddNode(EightGpuNode(0)).ok());
  ASSERT_TRUE(st.AddJob(MakeJob("j", {.tasks = 2, .gpus = 2})).ok());
  JobSlot j = *st.FindJob("j");
  NodeId n = *st.FindNode("node-0");
  Resource two{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 2, .gpu_mask = 0b11};
  st.AllocateTask(j, 0, 0, n, two);
  EXPECT_EQ(st.node(n).free.gpus, 6);
  EXPECT_DEATH(st.AllocateTask(j, 0, 1, n, two), "GPUs 0-1 are not free");
  Resource memory{.memory_mb = st.node(n).free.memory_mb + 1};
  EXPECT_DEATH(st.AllocateTask(j, 0, 1, n, memory), "MB memory wanted");
}

}  // namespace
}  // namespace trainyard::core
