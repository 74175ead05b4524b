// Tests of the node-list and trace readers: the hand-made files in testdata
// read as written, and bad input gives an error naming file, line and field.
#include "sim/trace_readers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/test_paths.h"

namespace trainyard::sim {
namespace {

using ::testing::HasSubstr;

// The error message of `s`, as a std::string so gmock prints it readably.
template <typename T>
std::string Error(const absl::StatusOr<T>& s) {
  return s.ok() ? "OK" : std::string(s.status().message());
}

absl::StatusOr<Trace> TraceFromText(const std::string& text) {
  auto table = CsvTable::Parse(text, "t.csv");
  if (!table.ok()) return table.status();
  return ParseTrace(*table);
}

absl::StatusOr<NodeList> NodesFromText(const std::string& text) {
  auto table = CsvTable::Parse(text, "n.csv");
  if (!table.ok()) return table.status();
  return ParseNodeList(*table);
}

TEST(NodeListTest, ReadsAlibabaColumns) {
  auto nodes = ReadNodeList(SimTestdataForTest("nodes_small.csv"));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->nodes.size(), 3u);
  EXPECT_EQ(nodes->nodes[0].name, "node-a");
  EXPECT_EQ(nodes->nodes[0].gpus, 8);
  EXPECT_EQ(nodes->nodes[0].gpu_model, "V100M32");
  EXPECT_EQ(nodes->nodes[2].cpu_milli, 32000);
  EXPECT_EQ(nodes->nodes[2].memory_mib, 131072);
  EXPECT_EQ(nodes->nodes[2].line, 5);
  EXPECT_TRUE(nodes->topology_assumed);
}

TEST(NodeListTest, ReadsTrainyardColumnsWithTopology) {
  auto nodes = NodesFromText(
      "name,cpu_milli,memory_mib,gpus,gpu_model,rack,topology\n"
      "n1,1000,1024,4,A10,r1,\"switches=0-1,2-3;sockets=0-3\"\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(nodes->nodes[0].rack, "r1");
  EXPECT_EQ(nodes->nodes[0].topology, "switches=0-1,2-3;sockets=0-3");
  EXPECT_FALSE(nodes->topology_assumed);
}

TEST(NodeListTest, AcceptsByteOrderMarkAndCrLf) {
  auto nodes = NodesFromText("\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu\r\nn1,1,1,2\r\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(nodes->nodes[0].gpus, 2);
}

TEST(NodeListTest, BadInputNamesLineAndField) {
  EXPECT_THAT(Error(NodesFromText("sn,cpu_milli,gpu\nn1,1,1\n")),
              HasSubstr("n.csv:1: missing column 'memory_mib'"));
  EXPECT_THAT(Error(NodesFromText("sn,cpu_milli,memory_mib,gpu\nn1,1,1,1\nn2,1,1,-2\n")),
              HasSubstr("n.csv:3: field 'gpu': '-2' is negative"));
  EXPECT_THAT(Error(NodesFromText("sn,cpu_milli,memory_mib,gpu\nn1,1,1,65\n")),
              HasSubstr("n.csv:2: field 'gpu': 65 GPUs is above"));
  EXPECT_THAT(Error(NodesFromText("sn,cpu_milli,memory_mib,gpu\nn1,x,1,1\n")),
              HasSubstr("field 'cpu_milli': 'x' is not an integer"));
  EXPECT_THAT(Error(NodesFromText("sn,cpu_milli,memory_mib,gpu\nn1,1,1,1\nn1,1,1,1\n")),
              HasSubstr("n.csv:3: field 'sn': node 'n1' is listed twice"));
  EXPECT_THAT(Error(NodesFromText("sn,cpu_milli,memory_mib,gpu\n")),
              HasSubstr("the node list is empty"));
  EXPECT_THAT(Error(NodesFromText("")), HasSubstr("n.csv: no header line"));
  EXPECT_EQ(ReadNodeList("/nonexistent/nodes.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(AlibabaTraceTest, ReadsPodsAndRoundsUpShares) {
  auto trace = ReadTrace(SimTestdataForTest("pods_small.csv"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->format, "alibaba-openb");
  ASSERT_EQ(trace->jobs.size(), 4u);
  EXPECT_EQ(trace->task_count, 4);
  EXPECT_EQ(trace->rounded_up_tasks, 1);
  const JobSpec& shared = trace->jobs[1];
  EXPECT_EQ(shared.name, "pod-1");
  EXPECT_EQ(shared.roles[0].gpus, 1);
  EXPECT_EQ(shared.roles[0].gpu_milli, 460);
  EXPECT_TRUE(shared.roles[0].rounded_up);
  EXPECT_EQ(shared.submit_s, 10);
  EXPECT_EQ(shared.duration_s, 50);  // deletion 70 - scheduled 20
  EXPECT_EQ(trace->jobs[2].roles[0].gpus, 0);
  EXPECT_EQ(trace->jobs[2].duration_s, 40);  // never scheduled: deletion - creation
  EXPECT_THAT(trace->jobs[3].gpu_models, ::testing::ElementsAre("V100M16", "V100M32"));
  EXPECT_EQ(trace->jobs[3].GpuCount(), 8);
}

TEST(AlibabaTraceTest, WithoutTimesPodsArriveOnePerSecondAndRunForever) {
  auto trace = TraceFromText("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,1,1000\nb,1,1,2,1000\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->jobs[1].submit_s, 1);
  EXPECT_EQ(trace->jobs[1].duration_s, kRunsForever);
}

TEST(AlibabaTraceTest, BadInputNamesLineAndField) {
  const std::string header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n";
  EXPECT_THAT(Error(TraceFromText("name,cpu_milli,memory_mib\na,1,1\n")),
              HasSubstr("unknown trace format"));
  EXPECT_THAT(Error(TraceFromText("name,cpu_milli,num_gpu\na,1,1\n")),
              HasSubstr("t.csv:1: missing column 'memory_mib'"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,-5,1,1000,0,1\n")),
              HasSubstr("t.csv:2: field 'memory_mib': '-5' is negative"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,1,1,1500,0,1\n")),
              HasSubstr("t.csv:2: field 'gpu_milli': 1500 is above 1000"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,1,0,300,0,1\n")),
              HasSubstr("field 'gpu_milli': 300 asks for a GPU share but num_gpu is 0"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,1,1,1000,10,5\n")),
              HasSubstr("t.csv:2: field 'deletion_time': 5 is before creation_time 10"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,1,1,1000,0,5\na,1,1,1,1000,0,5\n")),
              HasSubstr("t.csv:3: field 'name': pod 'a' is listed twice"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,1,1,1000,0,5,extra\n")),
              HasSubstr("t.csv:2: 8 fields but the header has 7 columns"));
  EXPECT_THAT(Error(TraceFromText(header + "a,1,1,,1000,0,5\n")),
              HasSubstr("field 'num_gpu': the value is empty"));
}

TEST(TrainyardTraceTest, GroupsRolesIntoGangs) {
  auto trace = ReadTrace(SimTestdataForTest("jobs_small.csv"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->format, "trainyard");
  ASSERT_EQ(trace->jobs.size(), 3u);
  EXPECT_EQ(trace->task_count, 9);
  const JobSpec& train = trace->jobs[0];
  EXPECT_EQ(train.name, "train-1");
  EXPECT_EQ(train.queue, "research");
  ASSERT_EQ(train.roles.size(), 2u);
  EXPECT_EQ(train.roles[1].name, "worker");
  EXPECT_EQ(train.TaskCount(), 6);
  EXPECT_EQ(train.GpuCount(), 8);
  EXPECT_EQ(trace->jobs[1].priority, PriorityClass::kProduction);
  EXPECT_THAT(trace->jobs[1].gpu_models, ::testing::ElementsAre("V100M32"));
  EXPECT_EQ(trace->jobs[2].priority, PriorityClass::kPtr);
  EXPECT_EQ(trace->jobs[2].duration_s, kRunsForever);
}

TEST(TrainyardTraceTest, BadInputNamesLineAndField) {
  const std::string header = "job,submit_time,duration,role,count,gpus,cpu_milli,memory_mib,priority\n";
  EXPECT_THAT(Error(TraceFromText(header + "j,0,10,w,1,1,1,1,urgent\n")),
              HasSubstr("t.csv:2: field 'priority': priority class \"urgent\" is unknown"));
  EXPECT_THAT(Error(TraceFromText(header + "j,0,10,w,0,1,1,1,\n")),
              HasSubstr("t.csv:2: field 'count': 0 is outside 1..100000"));
  EXPECT_THAT(Error(TraceFromText(header + "j,0,10,w,1,-1,1,1,\n")),
              HasSubstr("field 'gpus': '-1' is negative"));
  EXPECT_THAT(Error(TraceFromText(header + "j,0,10,w,1,1,1,1,\nj,5,10,p,1,0,1,1,\n")),
              HasSubstr("t.csv:3: field 'submit_time': differs from the first row of job 'j' (line 2)"));
  EXPECT_THAT(Error(TraceFromText("job,submit_time,gpus,cpu_milli\nj,0,1,1\n")),
              HasSubstr("missing column 'memory_mib'"));
}

TEST(DefaultTopologyTest, SwitchesOfTwoInTwoSockets) {
  EXPECT_EQ(DefaultTopologySpec(8), "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7");
  EXPECT_EQ(DefaultTopologySpec(4), "switches=0-1,2-3;sockets=0-1,2-3");
  EXPECT_EQ(DefaultTopologySpec(2), "switches=0-1;sockets=0-1");
  EXPECT_EQ(DefaultTopologySpec(1), "switches=0;sockets=0");
  EXPECT_EQ(DefaultTopologySpec(6), "switches=0-1,2-3,4-5;sockets=0-3,4-5");
}

}  // namespace
}  // namespace trainyard::sim

namespace trainyard::sim {
namespace {

// The public Alibaba openb trace, when CI has placed it beside the
// repository.
TEST(OpenbTraceTest, ReadsThePublicFiles) {
  std::string dir = OpenbDirForTest();
  if (dir.empty()) GTEST_SKIP() << "../shared/traces/alibaba-openb is absent; nothing to read";
  auto nodes = ReadNodeList(dir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(nodes->nodes.size(), 1213u);
  auto trace = ReadTrace(dir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->task_count, 8152);
  EXPECT_EQ(trace->rounded_up_tasks, 3078);
  auto multi = ReadTrace(dir + "/openb_pod_list_multigpu50.csv");
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_EQ(multi->task_count, 9061);
  EXPECT_EQ(multi->jobs.back().duration_s, kRunsForever);
}

}  // namespace
}  // namespace trainyard::sim
