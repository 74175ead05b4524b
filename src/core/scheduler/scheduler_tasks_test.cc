// One task of a placed job: placed again after its node was lost (queue
// limits, reservations, node name, selector and rack, the placement
// policy's order, the job's own nodes), adopted where it runs after a
// restart, and recovered jobs marked running.
#include <map>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/scheduler/scheduler.h"
#include "core/scheduler/scheduler_testing.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;
using testing::EightGpuNode;
using testing::JobArgs;
using testing::MakeJob;
using testing::T;

QueueConfig SchedulerTasksLeaf(std::string name, double cap, double max, double user_limit = 100) {
  return QueueConfig{.name = std::move(name),
                     .capacity_percent = cap,
                     .max_capacity_percent = max,
                     .user_limit_percent = user_limit};
}

std::unique_ptr<Scheduler> SchedulerTasksMake(int nodes, SchedulerOptions opt = {}) {
  auto s = Scheduler::Create(opt);
  EXPECT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < nodes; ++i) EXPECT_TRUE((*s)->AddNode(EightGpuNode(i)).ok());
  return *std::move(s);
}

std::unique_ptr<Scheduler> MakeCapacity(std::vector<QueueConfig> leaves, int nodes) {
  SchedulerOptions opt{.queue_policy = "capacity"};
  opt.queues.root.children = std::move(leaves);
  return SchedulerTasksMake(nodes, opt);
}

// Task index -> node of job `id` now.
std::map<int, std::string> NodesOf(const Scheduler& s, const std::string& id) {
  std::map<int, std::string> out;
  for (const TaskAssignment& t : s.state().Assignments(*s.state().FindJob(id))) {
    out[t.index] = t.node;
  }
  return out;
}

void SchedulerTasksSubmit(Scheduler* s, const std::string& id, const JobArgs& args, int now) {
  ASSERT_TRUE(s->AddJob(MakeJob(id, args)).ok());
  s->Schedule(T(now));
  ASSERT_FALSE(NodesOf(*s, id).empty()) << id << " was not placed";
}

// The node of task `index` of job `id` is lost, as the server sees it: the
// task releases what it held, then the node leaves.
void LoseNodeOf(Scheduler* s, const std::string& id, int index) {
  std::string node = NodesOf(*s, id).at(index);
  ASSERT_TRUE(s->TaskFinished(id, "worker", index).ok());
  ASSERT_TRUE(s->RemoveNode(node).ok());
}

TEST(PlaceTaskTest, HonoursQueueMaxCapacity) {
  auto s = MakeCapacity({SchedulerTasksLeaf("research", 40, 40), SchedulerTasksLeaf("prod", 60, 100)}, 5);  // 40 GPUs
  SchedulerTasksSubmit(s.get(), "r1", {.tasks = 2, .gpus = 8, .queue = "research"}, 1);  // 16 GPUs = 40%
  ASSERT_TRUE(s->TaskFinished("r1", "worker", 1).ok());
  SchedulerTasksSubmit(s.get(), "r2", {.gpus = 8, .queue = "research", .submit = 2}, 3);  // back at 40%
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("r1", "worker", 1);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t.status().message(),
            "job r1 task worker-1: queue research is at its max-capacity 40%");
  ASSERT_TRUE(s->RemoveJob("r2").ok());
  t = s->PlaceTask("r1", "worker", 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(s->state().QueueUsed(s->state().job(*s->state().FindJob("r1")).queue).gpus, 16);
}

// An elastic job asks how many of its waiting tasks would fit before it
// grows: the answer stops at the first refusal, and nothing is kept.
TEST(PlaceTaskTest, RoomForTasksCountsWhatWouldFitAndKeepsNothing) {
  auto s = SchedulerTasksMake(1);  // 8 GPUs
  SchedulerTasksSubmit(s.get(), "e", {.tasks = 4, .gpus = 2, .min_available = 2}, 1);  // all 4 placed
  ASSERT_TRUE(s->TaskFinished("e", "worker", 2).ok());
  ASSERT_TRUE(s->TaskFinished("e", "worker", 3).ok());
  SchedulerTasksSubmit(s.get(), "other", {.gpus = 2, .submit = 2}, 2);  // 2 GPUs left
  const NodeState& node = s->state().node(0);
  Resource free = node.free;
  absl::Status why;
  EXPECT_EQ(s->RoomForTasks("e", {{"worker", 2}, {"worker", 3}}, &why), 1);
  EXPECT_THAT(why.message(), HasSubstr("job e task worker-3: needs 2 GPUs on one node"));
  EXPECT_EQ(s->state().node(0).free.gpus, free.gpus) << "the trial gave back what it took";
  EXPECT_EQ(s->state().node(0).free.gpu_mask, free.gpu_mask);
  EXPECT_EQ(NodesOf(*s, "e").size(), 2u) << "workers 0 and 1 only";
  ASSERT_TRUE(s->RemoveJob("other").ok());
  EXPECT_EQ(s->RoomForTasks("e", {{"worker", 2}, {"worker", 3}}, &why), 2);
  EXPECT_TRUE(why.ok());
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("e", "worker", 3);
  EXPECT_TRUE(t.ok()) << t.status() << ": a trial leaves the task free to place";
}

TEST(PlaceTaskTest, HonoursTheUserLimit) {
  auto s = MakeCapacity({SchedulerTasksLeaf("default", 100, 100, /*user_limit=*/50)}, 2);  // 16 GPUs
  SchedulerTasksSubmit(s.get(), "a1", {.tasks = 2, .gpus = 4}, 1);
  ASSERT_TRUE(s->TaskFinished("a1", "worker", 1).ok());
  SchedulerTasksSubmit(s.get(), "a2", {.gpus = 4, .submit = 2}, 3);
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("a1", "worker", 1);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t.status().message(), "job a1 task worker-1: user alice is at the user limit of "
                                  "queue default (50% of its max-capacity)");
  // Another user of the queue is not held back by alice's limit.
  SchedulerTasksSubmit(s.get(), "b1", {.gpus = 4, .user = "bob", .submit = 4}, 5);
}

// node-0 runs "run" (1 task, 2 GPUs); node-1 then has 2 GPUs free (a
// ptr job holds 6), node-2 all 8. node-0 is lost.
std::unique_ptr<Scheduler> TightAndEmpty(SchedulerOptions opt = {}) {
  auto s = SchedulerTasksMake(1, opt);
  SchedulerTasksSubmit(s.get(), "run", {.gpus = 2}, 1);
  EXPECT_TRUE(s->AddNode(EightGpuNode(1)).ok());
  EXPECT_TRUE(s->AddNode(EightGpuNode(2)).ok());
  SchedulerTasksSubmit(s.get(), "low", {.gpus = 6, .priority = PriorityClass::kPtr, .node = "node-1"}, 2);
  LoseNodeOf(s.get(), "run", 0);
  return s;
}

TEST(PlaceTaskTest, TopologyBestFitPicksTheTightestNode) {
  auto s = TightAndEmpty();
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("run", "worker", 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, "node-1");
  EXPECT_EQ(t->role, "worker");
  EXPECT_EQ(t->allocation.gpus, 2);
  EXPECT_EQ(NodesOf(*s, "run"), (std::map<int, std::string>{{0, "node-1"}}));
}

TEST(PlaceTaskTest, SpreadPicksTheEmptiestNode) {
  auto s = TightAndEmpty(SchedulerOptions{.placement = "spread"});
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("run", "worker", 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, "node-2");
}

TEST(PlaceTaskTest, PassesOverANodeReservedForAnotherJob) {
  auto s = TightAndEmpty();
  // A production job that wants node-1 preempts "low" and holds node-1.
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 3, .node = "node-1"}))
                  .ok());
  Decisions d = s->Schedule(T(4));
  ASSERT_EQ(d.preemptions.size(), 1u);
  ASSERT_EQ(d.preemptions[0].victim_job_id, "low");
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("run", "worker", 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, "node-2") << "node-1 is the tightest but reserved for prod";
}

TEST(PlaceTaskTest, WaitsBehindAReservationWhenNoOtherNodeFits) {
  auto s = TightAndEmpty();
  SchedulerTasksSubmit(s.get(), "fill", {.gpus = 8, .submit = 3}, 4);  // node-2
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 5, .node = "node-1"}))
                  .ok());
  ASSERT_EQ(s->Schedule(T(6)).preemptions.size(), 1u);
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("run", "worker", 0);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t.status().message(),
            "job run task worker-0: waiting behind reservation for job prod");
}

TEST(PlaceTaskTest, NodeNameWithoutRelaxGoesOnlyToTheNamedNode) {
  auto s = SchedulerTasksMake(3);
  SchedulerTasksSubmit(s.get(), "pinned", {.gpus = 2, .node = "node-1"}, 1);
  LoseNodeOf(s.get(), "pinned", 0);
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("pinned", "worker", 0);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t.status().message(), "job pinned task worker-0: node node-1 is not in the cluster");
  ASSERT_TRUE(s->AddNode(EightGpuNode(1)).ok());  // it comes back
  t = s->PlaceTask("pinned", "worker", 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, "node-1");
}

TEST(PlaceTaskTest, NodeNameFullIsRefusedUnlessRelaxed) {
  for (bool relax : {false, true}) {
    auto s = SchedulerTasksMake(3);
    SchedulerTasksSubmit(s.get(), "j", {.tasks = 2, .gpus = 4, .node = "node-1", .relax = relax}, 1);
    ASSERT_EQ(NodesOf(*s, "j"), (std::map<int, std::string>{{0, "node-1"}, {1, "node-1"}}));
    ASSERT_TRUE(s->TaskFinished("j", "worker", 1).ok());
    SchedulerTasksSubmit(s.get(), "fill", {.gpus = 4, .submit = 2, .node = "node-1"}, 3);
    absl::StatusOr<TaskAssignment> t = s->PlaceTask("j", "worker", 1);
    if (!relax) {
      EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_EQ(t.status().message(), "job j task worker-1: needs 4 GPUs on one node; the most "
                                      "free on one node is 0 (node-1)");
    } else {
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_NE(t->node, "node-1");
    }
  }
}

TEST(PlaceTaskTest, HonoursNodeSelectorAndRack) {
  SchedulerOptions opt;
  auto s = Scheduler::Create(opt).value();
  // rack-0: node-0, node-1 (a100); rack-1: node-2 (v100), node-3, node-4
  // (a100). Only node-3 and node-4 are both a100 and in rack-1.
  const char* models[] = {"gpu=a100", "gpu=a100", "gpu=v100", "gpu=a100", "gpu=a100"};
  for (int i = 0; i < 5; ++i) {
    NodeSpec n = EightGpuNode(i, /*per_rack=*/2, models[i]);
    if (i == 4) n.rack = "rack-1";
    ASSERT_TRUE(s->AddNode(n).ok());
  }
  JobRequest job = MakeJob("sel", {.gpus = 2, .selector = "gpu=a100"});
  job.roles[0].rack = "rack-1";
  ASSERT_TRUE(s->AddJob(job).ok());
  s->Schedule(T(1));
  std::set<std::string> seen = {NodesOf(*s, "sel").at(0)};
  for (int loss = 0; loss < 2; ++loss) {
    LoseNodeOf(s.get(), "sel", 0);
    absl::StatusOr<TaskAssignment> t = s->PlaceTask("sel", "worker", 0);
    if (loss == 1) {
      EXPECT_EQ(t.status().message(),
                "job sel task worker-0: no schedulable node matches rack rack-1 and gpu in (a100)");
      break;
    }
    ASSERT_TRUE(t.ok()) << t.status();
    seen.insert(t->node);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"node-3", "node-4"}))
      << "only the a100 nodes of rack-1 serve it";
}

TEST(PlaceTaskTest, PrefersTheJobsOtherNodes) {
  auto s = SchedulerTasksMake(3);
  SchedulerTasksSubmit(s.get(), "big", {.tasks = 5, .gpus = 2}, 1);  // 4 tasks on one node, 1 on another
  std::map<std::string, std::vector<int>> by_node;
  for (const auto& [index, node] : NodesOf(*s, "big")) by_node[node].push_back(index);
  ASSERT_EQ(by_node.size(), 2u);
  std::string full, other;
  for (const auto& [node, tasks] : by_node) (tasks.size() == 4 ? full : other) = node;
  std::string third;
  for (int i = 0; i < 3; ++i) {
    if (std::string n = absl::StrCat("node-", i); !by_node.contains(n)) third = n;
  }
  // The third node is left the tightest fit for a 2-GPU task.
  SchedulerTasksSubmit(s.get(), "fill", {.gpus = 6, .submit = 2, .node = third}, 3);
  for (int index : by_node[full]) ASSERT_TRUE(s->TaskFinished("big", "worker", index).ok());
  ASSERT_TRUE(s->RemoveNode(full).ok());
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("big", "worker", by_node[full][0]);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, other) << "the job's own node comes before the tighter " << third;
}

TEST(PlaceTaskTest, PassesOverANodeWhoseExactPortsAreTaken) {
  auto s = SchedulerTasksMake(2);
  auto with_port = [](const std::string& id, int gpus, int submit) {
    JobRequest job = MakeJob(id, {.gpus = gpus, .submit = submit});
    job.roles[0].resource.ports = PortRanges::Of(30005, 30005).value();
    return job;
  };
  ASSERT_TRUE(s->AddJob(with_port("q", 6, 0)).ok());
  s->Schedule(T(1));
  std::string tight = NodesOf(*s, "q").at(0);  // 2 GPUs left, port 30005 taken
  ASSERT_TRUE(s->AddJob(with_port("p", 2, 1)).ok());
  s->Schedule(T(2));
  ASSERT_EQ(NodesOf(*s, "p").size(), 1u) << "the gang passes over " << tight;
  EXPECT_NE(NodesOf(*s, "p").at(0), tight);
  ASSERT_TRUE(s->AddNode(EightGpuNode(2)).ok());
  LoseNodeOf(s.get(), "p", 0);
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("p", "worker", 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, "node-2");
  EXPECT_EQ(t->allocation.ports.ToString(), "30005");
}

TEST(PlaceTaskTest, ErrorsNameWhatIsWrong) {
  auto s = SchedulerTasksMake(2);
  SchedulerTasksSubmit(s.get(), "j", {.tasks = 2, .gpus = 1}, 1);
  ASSERT_TRUE(s->AddJob(MakeJob("waiting", {.tasks = 2, .gpus = 8, .submit = 2})).ok());
  EXPECT_EQ(s->PlaceTask("nope", "worker", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s->PlaceTask("j", "ps", 0).status().message(), "job j has no role ps");
  EXPECT_EQ(s->PlaceTask("j", "worker", 2).status().message(),
            "job j role worker has 2 tasks; there is no index 2");
  absl::Status held = s->PlaceTask("j", "worker", 0).status();
  EXPECT_EQ(held.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(held.message(), HasSubstr("job j task worker-0 still holds its allocation on node node-"));
  absl::Status pending = s->PlaceTask("waiting", "worker", 0).status();
  EXPECT_EQ(pending.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pending.message(), "job waiting is pending: a round places it whole");
}

// A server restart: job "rec" (2 tasks of 2 GPUs) ran on node-0 before it.
TEST(RecoveryTest, MarkRunningKeepsTheJobOutOfThePendingQueue) {
  auto s = MakeCapacity({SchedulerTasksLeaf("default", 100, 100)}, 2);
  ASSERT_TRUE(s->AddJob(MakeJob("rec", {.tasks = 2, .gpus = 2})).ok());
  ASSERT_TRUE(s->MarkRunning("rec", T(5)).ok());
  EXPECT_EQ(s->state().PendingCount(), 0u);
  EXPECT_EQ(s->state().job(*s->state().FindJob("rec")).start_time, T(5));
  Decisions d = s->Schedule(T(10));
  EXPECT_TRUE(d.placements.empty()) << "its tasks are adopted, not placed anew";
  EXPECT_TRUE(d.pending.empty());
  EXPECT_EQ(s->MarkRunning("rec", T(5)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->MarkRunning("nope", T(5)).code(), absl::StatusCode::kNotFound);
}

TEST(RecoveryTest, AdoptTaskTakesTheExactAllocationAndNeverDoubleAllocates) {
  auto s = SchedulerTasksMake(2);
  ASSERT_TRUE(s->AddJob(MakeJob("rec", {.tasks = 2, .gpus = 2})).ok());
  ASSERT_TRUE(s->MarkRunning("rec", T(5)).ok());
  Resource a{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 2, .gpu_mask = 0b1100};
  a.ports = PortRanges::Of(30010, 30011).value();
  ASSERT_TRUE(s->AdoptTask("rec", "worker", 0, "node-0", a).ok());
  const NodeState& node = s->state().node(*s->state().FindNode("node-0"));
  EXPECT_EQ(GpuSet(node.free.gpu_mask).ToString(), "0-1,4-7");
  EXPECT_FALSE(node.free.ports.ContainsAll(a.ports));
  EXPECT_EQ(NodesOf(*s, "rec"), (std::map<int, std::string>{{0, "node-0"}}));

  absl::Status again = s->AdoptTask("rec", "worker", 1, "node-0", a);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message(),
            "job rec task worker-1: its allocation on node node-0 is not free (GPUs 2-3 are not "
            "free)");
  Resource ports_only{.memory_mb = 1, .ports = a.ports};
  EXPECT_THAT(s->AdoptTask("rec", "worker", 1, "node-0", ports_only).message(),
              HasSubstr("(ports 30010-30011 are not free)"));
  EXPECT_EQ(s->AdoptTask("rec", "worker", 0, "node-1", a).code(),
            absl::StatusCode::kFailedPrecondition)
      << "task 0 already holds its allocation";
  EXPECT_EQ(s->AdoptTask("rec", "worker", 1, "node-9", a).code(), absl::StatusCode::kNotFound);
  Resource odd = a;
  odd.gpus = 3;
  EXPECT_EQ(s->AdoptTask("rec", "worker", 1, "node-1", odd).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NodesOf(*s, "rec").size(), 1u) << "a refused adoption changes nothing";
  ASSERT_TRUE(s->AdoptTask("rec", "worker", 1, "node-1", a).ok());
}

TEST(RecoveryTest, AVictimsTaskIsAdoptedButNotPlacedAnew) {
  auto s = SchedulerTasksMake(1);
  SchedulerTasksSubmit(s.get(), "low", {.gpus = 8, .priority = PriorityClass::kPtr}, 1);
  ASSERT_TRUE(s->AddJob(MakeJob("prod", {.gpus = 8, .priority = PriorityClass::kProduction,
                                         .submit = 2}))
                  .ok());
  Decisions d = s->Schedule(T(3));
  ASSERT_EQ(d.preemptions.size(), 1u);
  Resource held = d.preemptions[0].tasks[0].allocation;
  // Its node re-registers with a new spec: the task leaves and comes back.
  ASSERT_TRUE(s->TaskFinished("low", "worker", 0).ok());
  EXPECT_EQ(s->PlaceTask("low", "worker", 0).status().message(), "job low is being preempted");
  ASSERT_TRUE(s->AdoptTask("low", "worker", 0, "node-0", held).ok());
  EXPECT_EQ(s->state().node(*s->state().FindNode("node-0")).free.gpus, 0);
  EXPECT_TRUE(s->Schedule(T(4)).placements.empty()) << "prod still waits for low to stop";
}

TEST(RecoveryTest, AnUnadoptedTaskIsPlacedBeforeAnyRound) {
  // After a restart the queue policy has not seen a round yet; a task whose
  // node never came back is still placed under the queue's limits.
  auto s = MakeCapacity({SchedulerTasksLeaf("research", 50, 50), SchedulerTasksLeaf("prod", 50, 100)}, 2);
  ASSERT_TRUE(s->AddJob(MakeJob("rec", {.tasks = 2, .gpus = 4, .queue = "research"})).ok());
  ASSERT_TRUE(s->MarkRunning("rec", T(5)).ok());
  Resource a{.memory_mb = 1024, .vcores_milli = 1000, .gpus = 4, .gpu_mask = 0b1111};
  ASSERT_TRUE(s->AdoptTask("rec", "worker", 0, "node-0", a).ok());
  absl::StatusOr<TaskAssignment> t = s->PlaceTask("rec", "worker", 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->node, "node-0") << "the job's own node first";
  ASSERT_TRUE(s->AddJob(MakeJob("more", {.gpus = 1, .queue = "research", .submit = 6})).ok());
  EXPECT_EQ(testing::ReasonOf(s->Schedule(T(7)), "more"),
            "queue research is at its max-capacity 50%");
}

}  // namespace
}  // namespace trainyard::core
