// Tests of the report renderings: one table column per run, the issue
// lists under the table, and the JSON keys scripts rely on.
#include "sim/report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::sim {
namespace {

using ::testing::HasSubstr;

SimReport Sample(const std::string& queue_policy) {
  SimReport r;
  r.queue_policy = queue_policy;
  r.placement = "topology";
  r.nodes_source = "nodes.csv";
  r.trace_source = "trace.csv";
  r.trace_format = "trainyard";
  r.jobs = 3;
  r.tasks = 5;
  r.rounded_up_tasks = 2;
  r.gpu_alloc_mean = 0.5;
  r.gpu_alloc_peak = 1;
  r.gpu_alloc_peak_time_s = 42;
  r.jobs_unschedulable = 1;
  r.unschedulable.push_back({"too-wide", "role worker needs 16 GPUs per task"});
  r.tasks_placed = 100;
  r.scheduler_wall_s = 0.5;
  return r;
}

TEST(ReportTest, TableHasOneColumnPerRun) {
  std::string table = FormatReportTable({Sample("fifo"), Sample("fair")});
  EXPECT_THAT(table, HasSubstr("queue policy"));
  EXPECT_THAT(table, HasSubstr("fifo"));
  EXPECT_THAT(table, HasSubstr("fair"));
  EXPECT_THAT(table, HasSubstr("50.0%"));
  EXPECT_THAT(table, HasSubstr("100.0% @42s"));
  EXPECT_THAT(table, HasSubstr("tasks rounded up to 1 GPU"));
  EXPECT_THAT(table, HasSubstr("fair/topology: 1 jobs unschedulable:\n  too-wide: role worker"));
}

TEST(ReportTest, JsonCarriesTheMeasures) {
  nlohmann::ordered_json j = ReportsToJson({Sample("fifo")});
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["queue_policy"], "fifo");
  EXPECT_EQ(j[0]["input"]["rounded_up_tasks"], 2);
  EXPECT_DOUBLE_EQ(j[0]["gpu_allocation"]["mean"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j[0]["scheduler"]["placements_per_s"].get<double>(), 200);
  EXPECT_EQ(j[0]["jobs"]["unschedulable_examples"][0]["job"], "too-wide");
  EXPECT_TRUE(j[0].contains("fragmentation"));
  EXPECT_TRUE(j[0]["wait_s"].contains("p99"));
}

}  // namespace
}  // namespace trainyard::sim
