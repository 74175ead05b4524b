// The FGD protocol on small clusters and traces whose outcomes are worked
// out by hand, and (where the public trace is present) a run of openb.
#include "sim/fgd_protocol.h"

#include "sim/fgd_policies.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/test_paths.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

using ::testing::HasSubstr;

NodeList Nodes(std::vector<std::pair<int, std::string>> gpus_and_model) {
  NodeList list;
  list.source = "nodes.csv";
  for (size_t i = 0; i < gpus_and_model.size(); ++i) {
    list.nodes.push_back(NodeSpec{.name = absl::StrCat("n", i),
                                  .cpu_milli = 64000,
                                  .memory_mib = 262144,
                                  .gpus = gpus_and_model[i].first,
                                  .gpu_model = gpus_and_model[i].second,
                                  .line = static_cast<int>(i + 2)});
  }
  return list;
}

// A pod of `milli` thousandths of one GPU (1000 * k for k whole GPUs).
JobSpec Pod(const std::string& name, int milli, std::vector<std::string> models = {}) {
  JobSpec job;
  job.name = name;
  RoleSpec role;
  role.cpu_milli = 1000;
  role.memory_mib = 1024;
  role.gpus = milli == 0 ? 0 : std::max(1, milli / 1000);
  role.gpu_milli = milli >= 1000 ? 1000 : milli;
  job.roles.push_back(role);
  job.gpu_models = std::move(models);
  return job;
}

Trace Pods(std::vector<JobSpec> jobs) {
  Trace t;
  t.source = "pods.csv";
  t.jobs = std::move(jobs);
  return t;
}

FgdPolicyResult Of(const FgdReport& r, const std::string& name) {
  for (const FgdPolicyResult& p : r.policies) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no policy " << name;
  return {};
}

TEST(FgdProtocolTest, SharesPackSoAWholeGpuTaskStillFits) {
  // Two 1-GPU nodes; 0.5 + 0.5 + 1.0 is exactly the capacity. Whatever the
  // order, packing the halves onto one GPU leaves the other whole.
  FgdOptions o{.seeds = {1, 2, 3, 4, 5, 6}, .inflate = 1.0,
               .policies = {"first-fit", "best-fit", "fgd", "fgd-int", "trainyard"}};
  auto r = RunFgdProtocol(Nodes({{1, ""}, {1, ""}}),
                          Pods({Pod("a", 500), Pod("b", 500), Pod("c", 1000)}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tasks_per_seed, 3);
  for (const FgdPolicyResult& p : r->policies) {
    EXPECT_DOUBLE_EQ(p.at_arrived.at("100").gpu_alloc_pct, 100) << p.name;
    EXPECT_DOUBLE_EQ(p.at_arrived.at("100").unallocated_gpus, 0) << p.name;
    EXPECT_TRUE(p.failed_by_shape.empty()) << p.name;
  }
}

TEST(FgdProtocolTest, InflationAppendsTasksAndWhatDoesNotFitFails) {
  // One GPU, one 0.5 pod: inflated to 130 % the workload is three 0.5 pods
  // (1.5 GPUs); at 100 % arrived the GPU is full, the third pod fails.
  FgdOptions o{.seeds = {7}, .inflate = 1.3, .policies = {"best-fit", "trainyard"}};
  auto r = RunFgdProtocol(Nodes({{1, ""}}), Pods({Pod("a", 500)}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tasks_per_seed, 3);
  EXPECT_EQ(r->gpu_capacity_milli, 1000);
  for (const FgdPolicyResult& p : r->policies) {
    EXPECT_DOUBLE_EQ(p.at_arrived.at("100").gpu_alloc_pct, 100) << p.name;
    EXPECT_DOUBLE_EQ(p.at_arrived.at("100").failed_tasks, 0) << p.name;
    EXPECT_DOUBLE_EQ(p.at_arrived.at("130").gpu_alloc_pct, 100) << p.name;
    EXPECT_DOUBLE_EQ(p.at_arrived.at("130").failed_tasks, 1) << p.name;
    EXPECT_EQ(p.failed_by_shape, (std::map<std::string, double>{{"share", 1}})) << p.name;
  }
  nlohmann::json j = FgdReportToJson(*r);
  EXPECT_EQ(j["policies"]["trainyard"]["gpu_alloc_pct_at_arrived"]["100"], 100.0);
  EXPECT_EQ(j["policies"]["best-fit"]["failed_tasks_by_shape"]["share"], 1.0);
}

TEST(FgdProtocolTest, UnconstrainedTasksLeaveTheScarceModelToTasksThatNeedIt) {
  // The V100 node is listed first, so first fit gives it to whichever task
  // comes first; when that is the unconstrained one, the V100-only task
  // fails. FGD, weighing the whole workload's shapes up front, sees that
  // only the V100 node can serve the V100 task and sends the other to the
  // T4. (The server's placement learns shapes as pods arrive, so it cannot
  // know of the V100 pod before it comes.)
  FgdOptions o{.seeds = {1, 2, 3, 4, 5, 6, 7, 8}, .inflate = 1.0,
               .policies = {"first-fit", "fgd"}};
  auto r = RunFgdProtocol(Nodes({{1, "V100M32"}, {1, "T4"}}),
                          Pods({Pod("any", 1000), Pod("v100", 1000, {"V100M32"})}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(Of(*r, "first-fit").failed_by_shape["model-constrained"], 0);
  EXPECT_EQ(Of(*r, "fgd").failed_by_shape.count("model-constrained"), 0u);
  EXPECT_DOUBLE_EQ(Of(*r, "fgd").at_arrived.at("100").gpu_alloc_pct, 100);
}

TEST(FgdProtocolTest, TrainyardIsTheServersPlacement) {
  // "trainyard" runs core:fragmentation: the same report to the last digit.
  Trace t = Pods({Pod("a", 300), Pod("b", 700), Pod("c", 1000), Pod("d", 2000), Pod("e", 0)});
  FgdOptions o{.seeds = {3, 4}, .inflate = 1.3, .policies = {"trainyard", "core:fragmentation"}};
  auto r = RunFgdProtocol(Nodes({{2, ""}, {4, ""}, {8, ""}}), t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  nlohmann::json j = FgdReportToJson(*r);
  for (auto& [name, p] : j["policies"].items()) p.erase("seconds_per_seed");
  EXPECT_EQ(j["policies"]["trainyard"], j["policies"]["core:fragmentation"]);
  EXPECT_THAT(RunFgdProtocol(Nodes({{1, ""}}), Pods({Pod("a", 500)}), {.policies = {"trainyard-online"}})
                  .status()
                  .message(),
              HasSubstr("'trainyard-online' is unknown"));
}

TEST(FgdProtocolTest, TheServersPlacementRunsBesideTheBaselines) {
  // core:NAME runs the scheduler core with placement NAME on the same pod
  // sequences: the halves pack, the whole GPU fits, nothing fails.
  FgdOptions o{.seeds = {1, 2, 3, 4}, .inflate = 1.0,
               .policies = {"best-fit", "core:fragmentation", "core:topology"}};
  auto r = RunFgdProtocol(Nodes({{1, ""}, {1, ""}}),
                          Pods({Pod("a", 500), Pod("b", 500), Pod("c", 1000)}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->policies.size(), 3u);
  for (const FgdPolicyResult& p : r->policies) {
    EXPECT_DOUBLE_EQ(p.at_arrived.at("100").gpu_alloc_pct, 100) << p.name;
    EXPECT_TRUE(p.failed_by_shape.empty()) << p.name;
  }
  EXPECT_TRUE(FgdReportToJson(*r)["policies"].contains("core:fragmentation"));
}

TEST(FgdProtocolTest, TheServersPlacementFailsWhatDoesNotFitAndKeepsModels) {
  // Three 0.5 pods on one GPU: the third fails for good (the core's round
  // leaves it pending; the protocol withdraws it). A pod naming a model no
  // node has fails too.
  FgdOptions o{.seeds = {7}, .inflate = 1.3, .policies = {"core:fragmentation"}};
  auto r = RunFgdProtocol(Nodes({{1, "T4"}}), Pods({Pod("a", 500)}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(Of(*r, "core:fragmentation").at_arrived.at("130").gpu_alloc_pct, 100);
  EXPECT_EQ(Of(*r, "core:fragmentation").failed_by_shape,
            (std::map<std::string, double>{{"share", 1}}));
  o.inflate = 1.0;
  o.policies = {"core:topology"};
  r = RunFgdProtocol(Nodes({{1, "T4"}, {1, "A10"}}),
                     Pods({Pod("t4", 1000, {"T4"}), Pod("v100", 1000, {"V100M32"})}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Of(*r, "core:topology").failed_by_shape["model-constrained"], 1);
}

TEST(FgdProtocolTest, IntegerFgdScoreIsRoundedDownAsPublished) {
  // 100 x logistic(drop in GPUs), truncated: no change is 50; a drop of one
  // GPU is 73.1 -> 73; a rise of one GPU 26.9 -> 26; a drop of 0.01 GPU
  // (10 thousandths over one counted task) still 50.
  EXPECT_EQ(FgdIntegerScore(0, 0, 5), 50);
  EXPECT_EQ(FgdIntegerScore(5000, 0, 5), 73);
  EXPECT_EQ(FgdIntegerScore(0, 5000, 5), 26);
  EXPECT_EQ(FgdIntegerScore(10, 0, 1), 50);
  EXPECT_EQ(FgdIntegerScore(100, 0, 1), 52);
  EXPECT_EQ(FgdIntegerScore(0, 0, 0), 50);
}

TEST(FgdProtocolTest, IntegerFgdPacksSharesAsFgdDoes) {
  FgdOptions o{.seeds = {1, 2, 3, 4, 5, 6}, .inflate = 1.0, .policies = {"fgd", "fgd-int"}};
  auto r = RunFgdProtocol(Nodes({{1, ""}, {1, ""}}),
                          Pods({Pod("a", 500), Pod("b", 500), Pod("c", 1000)}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(Of(*r, "fgd-int").at_arrived.at("100").gpu_alloc_pct, 100);
}

TEST(FgdProtocolTest, AModelNoNodeHasFailsTheTask) {
  FgdOptions o{.seeds = {1}, .inflate = 1.0, .policies = {"trainyard"}};
  auto r = RunFgdProtocol(Nodes({{1, "T4"}}), Pods({Pod("a10", 1000, {"A10"})}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Of(*r, "trainyard").failed_by_shape["model-constrained"], 1);
  EXPECT_EQ(Of(*r, "trainyard").failed_by_shape["1-gpu"], 1);
}

TEST(FgdProtocolTest, ErrorsNameWhatIsWrong) {
  FgdOptions o{.policies = {"worst-fit"}};
  auto r = RunFgdProtocol(Nodes({{1, ""}}), Pods({Pod("a", 500)}), o);
  EXPECT_THAT(r.status().message(), HasSubstr("placement policy 'worst-fit' is unknown"));
  o.policies = {"core:worst"};
  r = RunFgdProtocol(Nodes({{1, ""}}), Pods({Pod("a", 500)}), o);
  EXPECT_THAT(r.status().message(), HasSubstr("core:worst"));
  EXPECT_THAT(r.status().message(), HasSubstr("placement policy \"worst\" is unknown"));
  o.policies = {};
  EXPECT_THAT(RunFgdProtocol(Nodes({{0, ""}}), Pods({Pod("a", 500)}), o).status().message(),
              HasSubstr("the cluster has no GPUs"));
  EXPECT_THAT(RunFgdProtocol(Nodes({{1, ""}}), Pods({Pod("a", 0)}), o).status().message(),
              HasSubstr("no task asks for a GPU"));
  EXPECT_THAT(ParseSeedList("42-51").value(), ::testing::SizeIs(10));
  EXPECT_EQ(ParseSeedList("1,5-6").value(), (std::vector<uint64_t>{1, 5, 6}));
  EXPECT_THAT(ParseSeedList("9-3").status().message(), HasSubstr("'9-3' is not a seed or a range"));
}

TEST(FgdProtocolTest, TheSameSeedGivesTheSameReport) {
  FgdOptions o{.seeds = {3, 4}, .inflate = 1.3};
  Trace t = Pods({Pod("a", 300), Pod("b", 700), Pod("c", 1000), Pod("d", 2000), Pod("e", 0)});
  auto x = RunFgdProtocol(Nodes({{2, ""}, {4, ""}, {8, ""}}), t, o);
  auto y = RunFgdProtocol(Nodes({{2, ""}, {4, ""}, {8, ""}}), t, o);
  ASSERT_TRUE(x.ok() && y.ok());
  nlohmann::json jx = FgdReportToJson(*x), jy = FgdReportToJson(*y);
  for (auto* j : {&jx, &jy}) {
    for (auto& [name, p] : (*j)["policies"].items()) p.erase("seconds_per_seed");
  }
  EXPECT_EQ(jx, jy);
}

// The public trace, when present: the figures docs/sim.md quotes come from
// `trainyard sim --protocol fgd`; this checks one seed keeps Trainyard
// above best fit at 100 % arrival.
TEST(FgdProtocolTest, OpenbDefaultOneSeedBeatsBestFit) {
  std::string dir = OpenbDirForTest();
  if (dir.empty()) GTEST_SKIP() << "the Alibaba openb trace is not here";
  auto nodes = ReadNodeList(dir + "/openb_node_list_gpu_node.csv");
  auto trace = ReadTrace(dir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(nodes.ok() && trace.ok());
  auto r = RunFgdProtocol(*nodes, *trace, {.seeds = {42}, .inflate = 1.3,
                                           .policies = {"best-fit", "trainyard"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(Of(*r, "trainyard").at_arrived.at("100").gpu_alloc_pct,
            Of(*r, "best-fit").at_arrived.at("100").gpu_alloc_pct);
}

}  // namespace
}  // namespace trainyard::sim
