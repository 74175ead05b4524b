// Simulator tests on small hand-made traces (src/sim/testdata) whose
// outcomes are worked out by hand in each file's header comment, plus a run
// of the public Alibaba openb trace when it is present.
#include "sim/simulator.h"


#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_command.h"
#include "sim/test_paths.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

using ::testing::HasSubstr;

SimReport Replay(const std::string& nodes_file, const std::string& trace_file,
              SimOptions options = {}) {
  auto nodes = ReadNodeList(SimTestdataForTest(nodes_file));
  EXPECT_TRUE(nodes.ok()) << nodes.status();
  auto trace = ReadTrace(SimTestdataForTest(trace_file));
  EXPECT_TRUE(trace.ok()) << trace.status();
  if (!nodes.ok() || !trace.ok()) return {};
  auto report = Simulate(*nodes, *trace, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : SimReport{};
}

TEST(SimulatorTest, FifoWaitsCompletionsAndAllocation) {
  SimReport r = Replay("one_node.csv", "fifo_three_jobs.csv");
  EXPECT_EQ(r.jobs_started, 3);
  EXPECT_EQ(r.jobs_finished, 3);
  EXPECT_EQ(r.tasks_placed, 3);
  EXPECT_EQ(r.makespan_s, 150);
  EXPECT_DOUBLE_EQ(r.wait_s.mean, (0 + 90 + 80) / 3.0);
  EXPECT_DOUBLE_EQ(r.wait_s.p50, 80);
  EXPECT_DOUBLE_EQ(r.wait_s.p99, 90);
  EXPECT_DOUBLE_EQ(r.completion_s.mean, (100 + 140 + 110) / 3.0);
  EXPECT_DOUBLE_EQ(r.completion_s.p50, 110);
  EXPECT_DOUBLE_EQ(r.completion_s.p99, 140);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_mean, (130 * 1.0 + 20 * 0.5) / 150);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_peak, 1.0);
  EXPECT_EQ(r.gpu_alloc_peak_time_s, 0);
  // 150 s in spans of 2 s (150 / 100, rounded up): 100 % until 130, then 50 %.
  EXPECT_EQ(r.gpu_alloc_timeline_step_s, 2);
  ASSERT_EQ(r.gpu_alloc_timeline.size(), 75u);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_timeline[64], 1.0);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_timeline[65], 0.5);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_GT(r.scheduler_calls, 0);
}

TEST(SimulatorTest, FillIgnoresEndTimes) {
  SimOptions options;
  options.fill = true;
  SimReport r = Replay("one_node.csv", "fifo_three_jobs.csv", options);
  EXPECT_TRUE(r.fill);
  EXPECT_EQ(r.jobs_running_at_end, 1);  // a holds the node for ever
  EXPECT_EQ(r.jobs_pending_at_end, 2);
  EXPECT_EQ(r.jobs_finished, 0);
  EXPECT_EQ(r.makespan_s, 20);  // the last arrival
  ASSERT_EQ(r.pending_at_end.size(), 2u);
  EXPECT_EQ(r.pending_at_end[0].job, "b");
  EXPECT_FALSE(r.pending_at_end[0].reason.empty());
}

TEST(SimulatorTest, GangIsPlacedWholeOrNotAtAll) {
  SimReport r = Replay("two_nodes.csv", "gang_waits.csv");
  EXPECT_EQ(r.jobs_finished, 2);
  EXPECT_EQ(r.tasks_placed, 3);
  EXPECT_EQ(r.makespan_s, 110);
  EXPECT_DOUBLE_EQ(r.wait_s.max, 10);
  // Never a partial gang: 1/16 of the GPUs for 10 s, then all 16 for 100 s.
  EXPECT_DOUBLE_EQ(r.gpu_alloc_mean, (10 * (1.0 / 16) + 100 * 1.0) / 110);
  EXPECT_DOUBLE_EQ(r.completion_s.max, 110);
}

TEST(SimulatorTest, PreemptedJobResumesWithTheTimeItHasLeft) {
  SimReport r = Replay("one_node.csv", "preempt.csv");
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.preempted_jobs, 1);
  EXPECT_EQ(r.jobs_finished, 2);
  EXPECT_EQ(r.tasks_placed, 3);  // low twice, prod once
  EXPECT_EQ(r.makespan_s, 120);
  // prod waits 10..40 and ends at 60; low ends at 120.
  EXPECT_DOUBLE_EQ(r.wait_s.max, 30);
  EXPECT_DOUBLE_EQ(r.completion_s.p50, 50);
  EXPECT_DOUBLE_EQ(r.completion_s.max, 120);
}

TEST(SimulatorTest, AVictimIsPreemptedOnlyOnceItRanTheMinimumRunTime) {
  SimOptions options;
  options.preemption_min_runtime_s = 60;
  SimReport r = Replay("one_node.csv", "preempt.csv", options);
  // low (started at 0) may be preempted from 60: grace until 90, prod runs
  // 90..110, low resumes with 10 s left and ends at 120.
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.jobs_finished, 2);
  EXPECT_DOUBLE_EQ(r.wait_s.max, 80);
  EXPECT_DOUBLE_EQ(r.completion_s.max, 120);
  EXPECT_EQ(r.makespan_s, 120);
}

TEST(SimulatorTest, NeverFittingJobsAreReportedWithTheirReason) {
  SimOptions options;
  options.listed_jobs = 10;
  SimReport r = Replay("two_nodes.csv", "never_fits.csv", options);
  EXPECT_EQ(r.jobs_unschedulable, 4);
  EXPECT_EQ(r.jobs_finished, 1);
  ASSERT_EQ(r.unschedulable.size(), 4u);
  EXPECT_EQ(r.unschedulable[0].job, "too-wide");
  EXPECT_THAT(r.unschedulable[0].reason,
              HasSubstr("role worker needs 16 GPUs per task; the largest node has 8 GPUs"));
  EXPECT_THAT(r.unschedulable[1].reason, HasSubstr("needs GPU model H100; no node has it"));
  EXPECT_THAT(r.unschedulable[2].reason, HasSubstr("needs 24 GPUs in all; the cluster has 16"));
  EXPECT_THAT(r.unschedulable[3].reason, HasSubstr("99999999 MiB per task; no node has that much"));
}

TEST(SimulatorTest, SameInputSameReport) {
  SimReport a = Replay("two_nodes.csv", "jobs_small.csv");
  SimReport b = Replay("two_nodes.csv", "jobs_small.csv");
  a.scheduler_wall_s = b.scheduler_wall_s = 0;
  a.sim_wall_s = b.sim_wall_s = 0;
  EXPECT_EQ(ReportsToJson({a}).dump(), ReportsToJson({b}).dump());
}

TEST(SimCommandTest, OneReportPerPolicyCombination) {
  SimCommandOptions o;
  o.nodes_path = SimTestdataForTest("two_nodes.csv");
  o.trace_path = SimTestdataForTest("jobs_small.csv");
  o.queue_policies = "fifo,fair";
  o.placements = "topology,spread";
  auto reports = RunSimCommand(o);
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_EQ(reports->size(), 4u);
  EXPECT_EQ((*reports)[1].queue_policy, "fifo");
  EXPECT_EQ((*reports)[1].placement, "spread");
  EXPECT_EQ((*reports)[2].queue_policy, "fair");
  EXPECT_THAT(FormatReportTable(*reports), HasSubstr("fragmentation 4-GPU"));
}

// The same trace under each queue policy; waits worked out in
// testdata/two_queues.csv: FIFO 0,0,10,20,29; fair and capacity 0,0,9,20,30.
TEST(SimCommandTest, QueuePoliciesComparedOnOneTrace) {
  SimCommandOptions o;
  o.nodes_path = SimTestdataForTest("one_node.csv");
  o.trace_path = SimTestdataForTest("two_queues.csv");
  o.queue_policies = "fifo,capacity,fair";
  auto reports = RunSimCommand(o);
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_EQ(reports->size(), 3u);
  EXPECT_DOUBLE_EQ((*reports)[0].wait_s.p50, 10);  // fifo: b1 last
  EXPECT_DOUBLE_EQ((*reports)[0].wait_s.max, 29);
  for (int i : {1, 2}) {  // capacity, fair: b1 as soon as a2's turn comes
    EXPECT_DOUBLE_EQ((*reports)[i].wait_s.p50, 9) << (*reports)[i].queue_policy;
    EXPECT_DOUBLE_EQ((*reports)[i].wait_s.max, 30) << (*reports)[i].queue_policy;
  }
  for (const SimReport& r : *reports) EXPECT_EQ(r.makespan_s, 100);
}

TEST(SimCommandTest, QueuesFileGivesTreeAndPolicy) {
  SimCommandOptions o;
  o.nodes_path = SimTestdataForTest("one_node.csv");
  o.trace_path = SimTestdataForTest("two_queues.csv");
  o.queues_path = SimTestdataForTest("queues_ab.yaml");
  auto reports = RunSimCommand(o);
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_EQ(reports->front().queue_policy, "fair");
  EXPECT_DOUBLE_EQ(reports->front().wait_s.p50, 9);
  // A job naming a queue the file lacks cannot run; the reason says why.
  o.trace_path = SimTestdataForTest("jobs_small.csv");
  reports = RunSimCommand(o);
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_EQ(reports->front().jobs_unschedulable, 3);
  ASSERT_FALSE(reports->front().unschedulable.empty());
  EXPECT_THAT(reports->front().unschedulable[0].reason, HasSubstr("research"));
}

TEST(SimCommandTest, BadCommandsGiveClearErrors) {
  SimCommandOptions o;
  o.nodes_path = SimTestdataForTest("two_nodes.csv");
  o.trace_path = SimTestdataForTest("jobs_small.csv");
  o.queue_policies = "fifo,lottery";
  EXPECT_THAT(std::string(RunSimCommand(o).status().message()),
              HasSubstr("--queue-policy lottery"));
  o.queue_policies = "fifo,,fair";
  EXPECT_THAT(std::string(RunSimCommand(o).status().message()), HasSubstr("an empty name"));
  o.queue_policies = "fifo";
  o.trace_path = "";
  EXPECT_THAT(std::string(RunSimCommand(o).status().message()),
              HasSubstr("--nodes NODES.csv and --trace TASKS.csv are both required"));
}

TEST(SimCommandTest, SyntheticFillsTheCluster) {
  SimCommandOptions o;
  o.synthetic = SyntheticOptions{.nodes = 4, .gpus_per_node = 8, .tasks = 40};
  auto reports = RunSimCommand(o);
  ASSERT_TRUE(reports.ok()) << reports.status();
  const SimReport& r = reports->front();
  EXPECT_EQ(r.tasks_placed, 32);
  EXPECT_EQ(r.jobs_running_at_end, 32);
  EXPECT_EQ(r.jobs_pending_at_end, 8);
  EXPECT_DOUBLE_EQ(r.gpu_alloc_peak, 1.0);
  o.synthetic = SyntheticOptions{.nodes = 4, .gpus_per_node = 8, .tasks = 8, .gang = 8,
                                 .gpus_per_task = 4};
  reports = RunSimCommand(o);
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_EQ(reports->front().tasks_placed, 8);
  EXPECT_DOUBLE_EQ(reports->front().gpu_alloc_peak, 1.0);
}

// The public Alibaba openb trace, when CI has placed it beside the repository.
TEST(OpenbReplayTest, EverySchedulableTaskIsPlaced) {
  std::string dir = OpenbDirForTest();
  if (dir.empty()) GTEST_SKIP() << "../shared/traces/alibaba-openb is absent; nothing to replay";
  auto nodes = ReadNodeList(dir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto trace = ReadTrace(dir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto r = Simulate(*nodes, *trace, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tasks, 8152);
  EXPECT_EQ(r->rounded_up_tasks, 3078);
  EXPECT_EQ(r->jobs_started + r->jobs_unschedulable, r->jobs);
  EXPECT_EQ(r->jobs_finished, r->jobs_started);
  EXPECT_EQ(r->jobs_pending_at_end, 0);
  // The public trace is light: pods are short and the cluster mostly idle.
  EXPECT_GT(r->gpu_alloc_peak, 0);
  EXPECT_EQ(r->preemptions, 0);
}

}  // namespace
}  // namespace trainyard::sim
