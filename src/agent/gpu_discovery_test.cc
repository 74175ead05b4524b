// GPU discovery from recorded nvidia-smi output, simulated GPUs, the choice
// of method, and the exclusion of GPUs busy with processes we did not start.
//
// The recorded outputs in testdata/ are written in the formats that NVIDIA
// documents: the CSV of `nvidia-smi --query-gpu=... --format=csv` (field
// names from `nvidia-smi --help-query-gpu`; units in the header, "[N/A]" for
// fields a GPU cannot report, e.g. memory.used under MIG) and the matrix of
// `nvidia-smi topo -m` with its legend (X, NV#, PIX, PXB, PHB, NODE, SYS, CPU
// and NUMA affinity columns). dgx_a100: eight A100-SXM4-80GB on NVSwitch
// (NV12 between every pair) with two NICs per GPU pair, as in the NVIDIA DGX
// A100 User Guide's system topology. pcie_8gpu: eight V100-PCIE-32GB, two per
// PCIe switch, four per CPU socket (a common 2-socket 4U server layout).
#include "agent/gpu_discovery.h"

#include "absl/strings/str_join.h"
#include "agent/nvml_discovery.h"
#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::TestDataPath;

RecordedCommandRunner Recorded(const std::string& query_file, const std::string& topo_file) {
  RecordedCommandRunner runner;
  runner.Add(absl::StrJoin(NvidiaSmiQueryCommand(), " "), ReadFileOrEmpty(TestDataPath(query_file)));
  if (!topo_file.empty()) {
    runner.Add(absl::StrJoin(NvidiaSmiTopoCommand(), " "), ReadFileOrEmpty(TestDataPath(topo_file)));
  }
  return runner;
}

TEST(NvidiaSmiDiscoveryTest, ReadsEightPcieGpusWithSwitchesAndSockets) {
  RecordedCommandRunner runner = Recorded("nvidia_smi_query_pcie_8gpu.csv", "nvidia_smi_topo_pcie_8gpu.txt");
  NvidiaSmiGpuDiscovery discovery(&runner);
  absl::StatusOr<GpuInventory> inv = discovery.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->source, "nvidia-smi");
  ASSERT_EQ(inv->gpus.size(), 8u);
  EXPECT_EQ(inv->gpus[7].index, 7);
  EXPECT_EQ(inv->gpus[7].memory_total_mb, 32510);
  EXPECT_EQ(inv->gpus[0].model, "Tesla V100-PCIE-32GB");
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-1b2c3d4e-0001-4a00-8000-00000000a000");
  EXPECT_EQ(inv->topology.gpu_count(), 8);
  EXPECT_THAT(inv->topology.switches(),
              ElementsAre(core::GpuSet(0x03), core::GpuSet(0x0c), core::GpuSet(0x30), core::GpuSet(0xc0)));
  EXPECT_THAT(inv->topology.sockets(), ElementsAre(core::GpuSet(0x0f), core::GpuSet(0xf0)));
  EXPECT_TRUE(inv->topology.nvlink_islands().empty());
}

TEST(NvidiaSmiDiscoveryTest, ReadsDgxA100WithOneNvlinkIslandAndMemoryUse) {
  RecordedCommandRunner runner = Recorded("nvidia_smi_query_dgx_a100.csv", "nvidia_smi_topo_dgx_a100.txt");
  NvidiaSmiGpuDiscovery discovery(&runner);
  absl::StatusOr<GpuInventory> inv = discovery.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->gpus.size(), 8u);
  EXPECT_EQ(inv->gpus[5].memory_used_mb, 30512);
  EXPECT_EQ(inv->gpus[5].memory_total_mb, 81920);
  EXPECT_EQ(inv->topology.gpu_count(), 8);
  EXPECT_THAT(inv->topology.nvlink_islands(), ElementsAre(core::GpuSet(0xff)));
}

TEST(NvidiaSmiDiscoveryTest, ReadsTopologyOnceAndMemoryEveryTime) {
  RecordedCommandRunner runner = Recorded("nvidia_smi_query_dgx_a100.csv", "nvidia_smi_topo_dgx_a100.txt");
  NvidiaSmiGpuDiscovery discovery(&runner);
  ASSERT_TRUE(discovery.Discover().ok());
  runner.Add(absl::StrJoin(NvidiaSmiTopoCommand(), " "), "garbage");
  std::string query = ReadFileOrEmpty(TestDataPath("nvidia_smi_query_dgx_a100.csv"));
  query.replace(query.find("30512 MiB"), 9, "100 MiB");
  runner.Add(absl::StrJoin(NvidiaSmiQueryCommand(), " "), query);
  absl::StatusOr<GpuInventory> again = discovery.Discover();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->gpus[5].memory_used_mb, 100);
  EXPECT_THAT(again->topology.nvlink_islands(), ElementsAre(core::GpuSet(0xff)));
}

TEST(NvidiaSmiDiscoveryTest, MissingTopologyFallsBackToFlat) {
  RecordedCommandRunner runner = Recorded("nvidia_smi_query_pcie_8gpu.csv", "");
  NvidiaSmiGpuDiscovery discovery(&runner);
  absl::StatusOr<GpuInventory> inv = discovery.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->topology, core::GpuTopology::Flat(8));
}

TEST(NvidiaSmiDiscoveryTest, UnavailableMemoryReadsAsZero) {
  absl::StatusOr<std::vector<GpuInfo>> gpus =
      ParseNvidiaSmiQuery(ReadFileOrEmpty(TestDataPath("nvidia_smi_query_mig_na.csv")));
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].memory_used_mb, 0);
  EXPECT_EQ((*gpus)[1].memory_used_mb, 12);
  EXPECT_EQ((*gpus)[1].memory_total_mb, 81559);
}

// utilization.gpu (what the query asks since /metrics) is read where the
// driver says it and left unknown (-1) where it does not, or where an older
// recording has no such column.
TEST(NvidiaSmiDiscoveryTest, UtilizationIsReadWhereTheDriverSaysIt) {
  absl::StatusOr<std::vector<GpuInfo>> gpus = ParseNvidiaSmiQuery(
      "index, uuid, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n"
      "0, GPU-a, NVIDIA H200, 1024 MiB, 143771 MiB, 37 %\n"
      "1, GPU-b, NVIDIA H200, 0 MiB, 143771 MiB, [N/A]\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].utilization_percent, 37);
  EXPECT_EQ((*gpus)[1].utilization_percent, -1);
  absl::StatusOr<std::vector<GpuInfo>> old =
      ParseNvidiaSmiQuery(ReadFileOrEmpty(TestDataPath("nvidia_smi_query_pcie_8gpu.csv")));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ((*old)[0].utilization_percent, -1);
  EXPECT_THAT(absl::StrJoin(NvidiaSmiQueryCommand(), " "), HasSubstr("utilization.gpu"));
}

TEST(NvidiaSmiDiscoveryTest, BadQueryOutputNamesTheLine) {
  EXPECT_THAT(ParseNvidiaSmiQuery("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(ParseNvidiaSmiQuery("foo, bar\n").status().message(),
              HasSubstr("header must name the columns index and memory.total"));
  std::string bad = "index, memory.used [MiB], memory.total [MiB]\n0, 1 MiB, lots\n";
  EXPECT_THAT(ParseNvidiaSmiQuery(bad).status().message(),
              HasSubstr("line 2 \"0, 1 MiB, lots\": memory.total is not \"N MiB\""));
  std::string gap = "index, memory.total [MiB]\n0, 10 MiB\n2, 10 MiB\n";
  EXPECT_THAT(ParseNvidiaSmiQuery(gap).status().message(), HasSubstr("found index 2 at position 1"));
}

TEST(NvidiaSmiDiscoveryTest, MissingCommandIsAnError) {
  RecordedCommandRunner empty;
  NvidiaSmiGpuDiscovery discovery(&empty);
  EXPECT_FALSE(discovery.Discover().ok());
}

TEST(OwnerlessGpuTest, ExcludesBusyGpusNotRunningOurTasks) {
  RecordedCommandRunner runner = Recorded("nvidia_smi_query_dgx_a100.csv", "nvidia_smi_topo_dgx_a100.txt");
  GpuInventory inv = *NvidiaSmiGpuDiscovery(&runner).Discover();
  OwnerlessGpuOptions on{.enable = true, .not_ready_memory_threshold_mb = 20};
  // GPU 5 holds 30 GiB of someone else's; GPU 2's 4 MiB is under the threshold.
  EXPECT_EQ(OwnerlessBusyGpus(inv.gpus, core::GpuSet(), on), core::GpuSet(1 << 5));
  // The same memory use on a GPU that runs a task of ours is not ownerless.
  EXPECT_EQ(OwnerlessBusyGpus(inv.gpus, core::GpuSet(1 << 5), on), core::GpuSet());
  EXPECT_EQ(OwnerlessBusyGpus(inv.gpus, core::GpuSet(), {.enable = false}), core::GpuSet());
  EXPECT_EQ(OwnerlessBusyGpus(inv.gpus, core::GpuSet(), {.enable = true, .not_ready_memory_threshold_mb = 1}),
            core::GpuSet((1 << 5) | (1 << 2)));
}

TEST(SimulatedDiscoveryTest, TopologyFromSpecAndBusyGpus) {
  absl::StatusOr<GpuDiscoveryPtr> d = NewSimulatedDiscovery(
      {.simulate_gpus = 8, .gpu_topology = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7", .simulated_memory_mb = 16384});
  ASSERT_TRUE(d.ok()) << d.status();
  auto* sim = static_cast<SimulatedGpuDiscovery*>(d->get());
  ASSERT_TRUE(sim->SetMemoryUsed(3, 9000).ok());
  EXPECT_THAT(sim->SetMemoryUsed(8, 1).message(), HasSubstr("GPU index 8 is outside 0..7"));
  GpuInventory inv = *sim->Discover();
  EXPECT_EQ(inv.source, "simulated");
  ASSERT_EQ(inv.gpus.size(), 8u);
  EXPECT_EQ(inv.gpus[3].memory_used_mb, 9000);
  EXPECT_EQ(inv.gpus[3].memory_total_mb, 16384);
  EXPECT_EQ(inv.topology.switches().size(), 4u);
  EXPECT_EQ(OwnerlessBusyGpus(inv.gpus, core::GpuSet(), {.enable = true}), core::GpuSet(1 << 3));
}

TEST(SimulatedDiscoveryTest, BadOptionsNameTheFlag) {
  EXPECT_THAT(NewSimulatedDiscovery({.simulate_gpus = 65}).status().message(),
              HasSubstr("--simulate-gpus 65 is outside 0..64"));
  EXPECT_THAT(NewSimulatedDiscovery({.simulate_gpus = 4, .gpu_topology = "sockets=0-7"}).status().message(),
              HasSubstr("--gpu-topology \"sockets=0-7\""));
  EXPECT_THAT(NewSimulatedDiscovery({.simulate_gpus = 8, .gpu_topology = "gpus=4"}).status().message(),
              HasSubstr("describes 4 GPUs but --simulate-gpus is 8"));
}

TEST(ChooseDiscoveryTest, FallsBackFromNvmlToNvidiaSmiToNone) {
  RecordedCommandRunner runner = Recorded("nvidia_smi_query_pcie_8gpu.csv", "nvidia_smi_topo_pcie_8gpu.txt");
  GpuDiscoveryOptions options{.nvml_library = "libtrainyard-no-such-nvml.so.1", .runner = &runner};
  absl::StatusOr<GpuDiscoveryPtr> d = ChooseGpuDiscovery(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->Name(), "nvidia-smi");
  RecordedCommandRunner nothing;
  options.runner = &nothing;
  d = ChooseGpuDiscovery(options);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->Name(), "simulated");
  EXPECT_TRUE((*d)->Discover()->gpus.empty());
  options.simulate_gpus = 2;
  EXPECT_EQ((*ChooseGpuDiscovery(options))->Discover()->gpus.size(), 2u);
}

TEST(NvmlDiscoveryTest, MissingLibraryIsUnavailable) {
  absl::StatusOr<GpuDiscoveryPtr> d = NvmlGpuDiscovery::Open("libtrainyard-no-such-nvml.so.1");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(d.status().message(), HasSubstr("cannot load libtrainyard-no-such-nvml.so.1"));
}

TEST(NvmlDiscoveryTest, LevelsGoStraightIntoTheTopology) {
  using L = NvmlTopologyLevel;
  // Two sockets of two GPUs; GPUs 0-1 and 2-3 each share a PCIe switch.
  std::vector<std::vector<L>> levels = {{L::kInternal, L::kSingle, L::kSystem, L::kSystem},
                                        {L::kSingle, L::kInternal, L::kSystem, L::kSystem},
                                        {L::kSystem, L::kSystem, L::kInternal, L::kSingle},
                                        {L::kSystem, L::kSystem, L::kSingle, L::kInternal}};
  absl::StatusOr<core::GpuTopology> topology =
      core::GpuTopology::FromLinkMatrix(NvmlLinkMatrix(levels));
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_THAT(topology->switches(), ElementsAre(core::GpuSet(0x3), core::GpuSet(0xc)));
  EXPECT_THAT(topology->sockets(), ElementsAre(core::GpuSet(0x3), core::GpuSet(0xc)));
}

TEST(NvmlDiscoveryTest, SwitchPairsThatAreNotRangesAreKept) {
  using L = NvmlTopologyLevel;
  // Eight GPUs as NVML reports a board whose PCIe switches hold GPUs
  // {0,2}, {1,3}, {4,6}, {5,7}: PIX inside a pair, NODE inside a socket,
  // SYS across the two sockets.
  std::vector<std::vector<L>> levels(8, std::vector<L>(8));
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      levels[a][b] = a == b                 ? L::kInternal
                     : a / 4 != b / 4       ? L::kSystem
                     : (a % 2) == (b % 2)   ? L::kSingle
                                            : L::kNode;
    }
  }
  absl::StatusOr<core::GpuTopology> topology =
      core::GpuTopology::FromLinkMatrix(NvmlLinkMatrix(levels));
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->ToSpec(), "gpus=8;switches=0+2,1+3,4+6,5+7;sockets=0-3,4-7");
}

TEST(NvmlDiscoveryTest, LevelsMapOntoPcieLinks) {
  EXPECT_EQ(ToPcieLink(NvmlTopologyLevel::kInternal), core::PcieLink::kInternal);
  EXPECT_EQ(ToPcieLink(NvmlTopologyLevel::kSingle), core::PcieLink::kSingleSwitch);
  EXPECT_EQ(ToPcieLink(NvmlTopologyLevel::kMultiple), core::PcieLink::kMultipleSwitches);
  EXPECT_EQ(ToPcieLink(NvmlTopologyLevel::kHostBridge), core::PcieLink::kHostBridge);
  EXPECT_EQ(ToPcieLink(NvmlTopologyLevel::kNode), core::PcieLink::kNumaNode);
  EXPECT_EQ(ToPcieLink(NvmlTopologyLevel::kSystem), core::PcieLink::kSystem);
  // A level a later NVML may add claims no grouping.
  EXPECT_EQ(ToPcieLink(static_cast<NvmlTopologyLevel>(35)), core::PcieLink::kSystem);
}

}  // namespace
}  // namespace trainyard::agent
