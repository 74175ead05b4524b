// Tests for GpuTopology: the compact spec and its errors, canonical printing,
// and parsing recorded `nvidia-smi topo -m` outputs of real 8-GPU machines.
//
// Recorded outputs in testdata/ (copied verbatim from public pages):
// - dgx1_v100_topo.txt: 8x V100-SXM2 in the DGX-1 hybrid cube-mesh (NV1/NV2),
//   one mlx5 NIC, CPU Affinity only. From the OneFlow DLPerf benchmark
//   reports, github.com/Oneflow-Inc/DLPerf (e.g. OneFlow ResNet50-V1.5 report,
//   "Test Environment").
// - dgx1_v100_nics_topo.txt: the same cube-mesh on a NERSC Cori GPU node
//   (host cgpu04) with a PIX-attached NIC pair per GPU pair and NUMA Affinity;
//   from a comment in a public Slurm launch script on GitHub that binds each
//   rank to its PIX NIC ("srun -n1 nvidia-smi topo -m" on cgpu04).
// - hgx_a100_topo.txt: 8x A100 on an NVSwitch board (all pairs NV12), 18 NICs
//   behind PXB, four NUMA nodes (AMD EPYC, NPS4); from a public operator's
//   notes for an Oracle Cloud A100 cluster (host GPU-87) on GitHub. The same
//   layout is published in github.com/NVIDIA/nccl/issues/1505 (DGX A100).
// - pcie_8gpu_topo.txt: an 8-GPU PCIe server (PIX pairs, PXB within a socket,
//   SYS across), from the environment report in
//   github.com/vllm-project/vllm/issues/11122. The published excerpt stops
//   in the GPU6 row; rows GPU6/GPU7 are completed from the matrix's symmetry
//   (the 6-7 cell as PXB, like its mirror 2-3).
#include "core/resources/gpu_topology.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;

std::string ReadTestdata(const std::string& name) {
  std::string dir;
  if (const char* root = std::getenv("TRAINYARD_SOURCE_DIR"); root != nullptr && *root) {
    dir = std::string(root) + "/src/core/resources/testdata/";
  } else {
    std::string here = __FILE__;
    dir = here.substr(0, here.rfind('/') + 1) + "testdata/";
  }
  std::ifstream in(dir + name);
  EXPECT_TRUE(in.good()) << "cannot read " << dir + name;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string SpecOf(absl::string_view spec) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromSpec(std::string(spec));
  if (!t.ok()) return std::string(t.status().message());
  return t->ToSpec();
}

std::string GpuTopologyErrorOf(absl::string_view spec) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromSpec(std::string(spec));
  return t.ok() ? "OK: " + t->ToSpec() : std::string(t.status().message());
}

TEST(GpuTopologyTest, SpecWithSwitchesSocketsAndNvlink) {
  absl::StatusOr<GpuTopology> t =
      GpuTopology::FromSpec("switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7;nvlink=0-3,4-7");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->gpu_count(), 8);
  EXPECT_EQ(t->switches().size(), 4u);
  EXPECT_EQ(t->sockets()[1], GpuSet(0xf0));
  EXPECT_EQ(t->nvlink_islands()[0], GpuSet(0x0f));
  EXPECT_EQ(t->switch_of(5), 2);
  EXPECT_EQ(t->socket_of(5), 1);
  EXPECT_EQ(t->socket_of_switch(1), 0);
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7;nvlink=0-3,4-7");
}

TEST(GpuTopologyTest, GpusAloneMeansOneSwitchPerGpuAndOneSocket) {
  EXPECT_EQ(SpecOf("gpus=4"), "gpus=4;switches=0,1,2,3;sockets=0-3");
  EXPECT_EQ(SpecOf("gpus=0"), "gpus=0");
  EXPECT_EQ(SpecOf("sockets=0-1,2-3"), "gpus=4;switches=0,1,2,3;sockets=0-1,2-3");
}

TEST(GpuTopologyTest, PlusJoinsRangesAndGroupsAreSorted) {
  EXPECT_EQ(SpecOf("switches=4-5,0+2,1+3,6-7;sockets=4-7,0-3"),
            "gpus=8;switches=0+2,1+3,4-5,6-7;sockets=0-3,4-7");
}

TEST(GpuTopologyTest, ToSpecRoundTrips) {
  for (const char* spec : {"gpus=8", "switches=0-3,4-7;sockets=0-7", "gpus=64",
                           "switches=0+2,1+3;sockets=0-3;nvlink=0-1", "gpus=1"}) {
    absl::StatusOr<GpuTopology> a = GpuTopology::FromSpec(spec);
    ASSERT_TRUE(a.ok()) << spec << ": " << a.status();
    absl::StatusOr<GpuTopology> b = GpuTopology::FromSpec(a->ToSpec());
    ASSERT_TRUE(b.ok()) << a->ToSpec();
    EXPECT_EQ(*a, *b) << spec;
  }
}

TEST(GpuTopologyTest, FlatIsOneSwitch) {
  EXPECT_EQ(GpuTopology::Flat(8).ToSpec(), "gpus=8;switches=0-7;sockets=0-7");
  EXPECT_EQ(GpuTopology::Flat(0).gpu_count(), 0);
  EXPECT_EQ(GpuTopology::Flat(64).all().Count(), 64);
}

TEST(GpuTopologyTest, MalformedSpecsNameWhatIsWrong) {
  EXPECT_THAT(GpuTopologyErrorOf(""), HasSubstr("topology spec is empty"));
  EXPECT_THAT(GpuTopologyErrorOf("switches"), HasSubstr("'switches' is not key=value"));
  EXPECT_THAT(GpuTopologyErrorOf("racks=0-7"), HasSubstr("unknown key 'racks'"));
  EXPECT_THAT(GpuTopologyErrorOf("gpus=8;gpus=4"), HasSubstr("'gpus' given twice"));
  EXPECT_THAT(GpuTopologyErrorOf("gpus=65"), HasSubstr("gpus: 65 is above the maximum 64"));
  EXPECT_THAT(GpuTopologyErrorOf("gpus=eight"), HasSubstr("gpus: 'eight' is not a GPU count"));
  EXPECT_THAT(GpuTopologyErrorOf("switches=0-64"),
              HasSubstr("switches: group '0-64': GPU set: GPU index 64 in '0-64' is outside"));
  EXPECT_THAT(GpuTopologyErrorOf("switches=3-1"), HasSubstr("range '3-1' is reversed"));
  EXPECT_THAT(GpuTopologyErrorOf("switches=0-1,,2-3"), HasSubstr("switches: empty group"));
  EXPECT_THAT(GpuTopologyErrorOf("switches=0-2,2-3"),
              HasSubstr("topology spec: switches[1] '2-3': GPU 2 is also in switches[0] '0-2'"));
  EXPECT_THAT(GpuTopologyErrorOf("gpus=8;switches=0-3"), HasSubstr("switches: GPUs 4-7 are in no group"));
  EXPECT_THAT(GpuTopologyErrorOf("gpus=8;switches=0-9"),
              HasSubstr("switches[0] '0-9': has GPUs outside the node's 8 GPUs (8-9)"));
  EXPECT_THAT(GpuTopologyErrorOf("switches=0-1,2-5,6-7;sockets=0-3,4-7"),
              HasSubstr("switches[1] '2-5': spans sockets[0] '0-3' and sockets[1] '4-7'; a "
                        "switch must sit inside one socket"));
  EXPECT_THAT(GpuTopologyErrorOf("gpus=8;nvlink=0-3,3-4"),
              HasSubstr("nvlink_islands[1] '3-4': GPU 3 is also in nvlink_islands[0] '0-3'"));
  EXPECT_THAT(GpuTopologyErrorOf("nvlink=0-3"), HasSubstr("give gpus=N or switches="));
}

TEST(GpuTopologyTest, ParsesDgx1CubeMesh) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(ReadTestdata("dgx1_v100_topo.txt"));
  ASSERT_TRUE(t.ok()) << t.status();
  // Sockets from CPU affinity; only GPUs 2-3 share a switch (both PIX to
  // mlx5_0); GPUs 0 and 1 reach the NIC through NODE, so stay apart.
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0,1,2-3,4,5,6,7;sockets=0-3,4-7;nvlink=0-3,4-7");
}

TEST(GpuTopologyTest, ParsesDgx1WithNicPairs) {
  absl::StatusOr<GpuTopology> t =
      GpuTopology::FromNvidiaSmiTopo(ReadTestdata("dgx1_v100_nics_topo.txt"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7;nvlink=0-3,4-7");
}

TEST(GpuTopologyTest, ParsesHgxA100WithFourNumaNodes) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(ReadTestdata("hgx_a100_topo.txt"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0-1,2-3,4-5,6-7;sockets=0-1,2-3,4-5,6-7;nvlink=0-7");
}

TEST(GpuTopologyTest, ParsesPcieServer) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(ReadTestdata("pcie_8gpu_topo.txt"));
  ASSERT_TRUE(t.ok()) << t.status();
  // NUMA affinity is N/A and the CPU affinity is the same for all: SYS alone
  // splits the sockets. PIX pairs 0-1 and 4-5; PXB GPUs stay on their own.
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0-1,2,3,4-5,6,7;sockets=0-3,4-7");
  EXPECT_FALSE(t->has_nvlink());
}

TEST(GpuTopologyTest, ParsesTabsAndEscapesOfNewerDrivers) {
  std::string text =
      "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
      "GPU0\t X \tPHB\t0-63\t0\t\tN/A\n"
      "GPU1\tPHB\t X \t0-63\t0\t\tN/A\n";
  absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(text);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=2;switches=0,1;sockets=0-1");
}

TEST(GpuTopologyTest, NumaAffinityWinsOverCpuAffinity) {
  std::string text =
      "        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      PHB     PHB     0-63            0\n"
      "GPU1    PHB      X      PHB     0-63            1\n"
      "GPU2    PHB     PHB      X      0-63            1\n";
  absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(text);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=3;switches=0,1,2;sockets=0,1-2");
}

std::string TopoError(const std::string& text) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromNvidiaSmiTopo(text);
  return t.ok() ? "OK: " + t->ToSpec() : std::string(t.status().message());
}

TEST(GpuTopologyTest, BadNvidiaSmiTextNamesTheLine) {
  EXPECT_THAT(TopoError("No devices were found\n"), HasSubstr("no header line starting with GPU0"));
  EXPECT_THAT(TopoError("  GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX X\n"), HasSubstr("OK"));
  EXPECT_THAT(TopoError("  GPU0 GPU1\nGPU0 X FAST\nGPU1 PIX X\n"),
              HasSubstr("line 2 (GPU0): cell 'FAST' in column GPU1 is not a link type"));
  EXPECT_THAT(TopoError("  GPU0 GPU1\nGPU0 X\nGPU1 PIX X\n"),
              HasSubstr("line 2 (GPU0): has 1 cells; the header has 2 devices"));
  EXPECT_THAT(TopoError("  GPU0 GPU1\nGPU0 X PIX\n"), HasSubstr("no row for GPU1"));
  EXPECT_THAT(TopoError("  GPU0 GPU2\nGPU0 X PIX\n"),
              HasSubstr("header column 2 is 'GPU2', expected 'GPU1'"));
  EXPECT_THAT(TopoError("  GPU0 GPU1\nGPU0 PIX PIX\nGPU1 PIX X\n"),
              HasSubstr("X marks the GPU's own column only"));
  std::string wide = " ";
  for (int i = 0; i < 65; ++i) wide += " GPU" + std::to_string(i);
  EXPECT_THAT(TopoError(wide + "\n"), HasSubstr("names 65 GPUs; a node has at most 64"));
}

TEST(GpuTopologyTest, DefaultSpecDescribesEveryGpuCount) {
  for (int n = 0; n <= kMaxGpus; ++n) {
    absl::StatusOr<GpuTopology> t = GpuTopology::FromSpec(DefaultTopologySpec(n));
    ASSERT_TRUE(t.ok()) << n << " GPUs: " << DefaultTopologySpec(n) << ": " << t.status();
    EXPECT_EQ(t->gpu_count(), n) << DefaultTopologySpec(n);
  }
  EXPECT_EQ(DefaultTopologySpec(8), "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7");
  EXPECT_EQ(DefaultTopologySpec(4), "switches=0-1,2-3;sockets=0-1,2-3");
  EXPECT_EQ(DefaultTopologySpec(1), "switches=0;sockets=0");
}

}  // namespace
}  // namespace trainyard::core
