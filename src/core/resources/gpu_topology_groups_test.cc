// Tests for the constructors that take groups as bitmaps: FromGroups (any
// grouping kept, every invalid one refused naming the level and the group)
// and FromLinkMatrix (pairwise links -> groups), and placement on groupings
// that are not contiguous ranges — NVLink pairs across PCIe switches.
#include <random>
#include <string>
#include <vector>

#include "core/resources/gpu_placement.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/gpu_topology_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GpuSet Bits(uint64_t bits) { return GpuSet(bits); }

// Switches {0,2} {1,3} {4,6} {5,7}; sockets 0-3, 4-7: each switch pairs GPUs
// that a range could not name.
GpuGroups Interleaved() {
  return {.gpu_count = 8,
          .switches = {Bits(0x05), Bits(0x0a), Bits(0x50), Bits(0xa0)},
          .sockets = {Bits(0x0f), Bits(0xf0)}};
}

std::string ErrorOf(GpuGroups g) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromGroups(std::move(g));
  return t.ok() ? "OK: " + t->ToSpec() : std::string(t.status().message());
}

std::string GpuTopologyGroupsChoose(const GpuTopology& topo, uint64_t free, int count) {
  absl::StatusOr<GpuChoice> c = ChooseGpus(topo, GpuSet(free), count, 0);
  if (!c.ok()) return std::string(c.status().message());
  return c->gpus.ToString() + " " + TightnessName(c->tightness);
}

TEST(GpuTopologyGroupsTest, NonContiguousGroupsAreKept) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromGroups(Interleaved());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0+2,1+3,4+6,5+7;sockets=0-3,4-7");
  EXPECT_EQ(t->switch_of(2), t->switch_of(0));
  EXPECT_NE(t->switch_of(1), t->switch_of(0));
  EXPECT_EQ(t->socket_of_switch(t->switch_of(6)), 1);
  EXPECT_EQ(*GpuTopology::FromSpec(t->ToSpec()), *t);
  EXPECT_EQ(*GpuTopology::FromGroups(t->groups()), *t);
}

TEST(GpuTopologyGroupsTest, GroupsAreSortedByLowestGpu) {
  GpuGroups g = Interleaved();
  g.switches = {Bits(0xa0), Bits(0x50), Bits(0x0a), Bits(0x05)};
  g.sockets = {Bits(0xf0), Bits(0x0f)};
  absl::StatusOr<GpuTopology> t = GpuTopology::FromGroups(g);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, *GpuTopology::FromGroups(Interleaved()));
}

TEST(GpuTopologyGroupsTest, EmptyLevelsTakeTheSpecDefaults) {
  EXPECT_EQ(ErrorOf({.gpu_count = 3}), "OK: gpus=3;switches=0,1,2;sockets=0-2");
  EXPECT_EQ(ErrorOf({.gpu_count = 0}), "OK: gpus=0");
}

TEST(GpuTopologyGroupsTest, InvalidGroupsNameTheLevelAndTheGroupAsGiven) {
  EXPECT_EQ(ErrorOf({.gpu_count = 65}), "gpu_count: 65 is outside 0..64");
  EXPECT_EQ(ErrorOf({.gpu_count = -1}), "gpu_count: -1 is outside 0..64");
  GpuGroups g = Interleaved();
  g.switches = {Bits(0x50), Bits(0x05), Bits(0x0a), Bits(0xa0), Bits(0x04)};
  EXPECT_EQ(ErrorOf(g), "switches[4] '2': GPU 2 is also in switches[1] '0+2'");
  g = Interleaved();
  g.switches[2] = Bits(0);
  EXPECT_EQ(ErrorOf(g), "switches[2]: empty group");
  g = Interleaved();
  g.switches[3] = Bits(0x1a0);
  EXPECT_EQ(ErrorOf(g), "switches[3] '5+7-8': has GPUs outside the node's 8 GPUs (8)");
  g = Interleaved();
  g.switches.pop_back();
  EXPECT_EQ(ErrorOf(g), "switches: GPUs 5,7 are in no group");
  g = Interleaved();
  g.sockets = {Bits(0x0f), Bits(0x70)};
  EXPECT_EQ(ErrorOf(g), "sockets: GPUs 7 are in no group");
  g = Interleaved();
  g.switches = {Bits(0x11), Bits(0x22), Bits(0x44), Bits(0x88)};
  EXPECT_EQ(ErrorOf(g),
            "switches[0] '0+4': spans sockets[0] '0-3' and sockets[1] '4-7'; a switch must sit "
            "inside one socket");
  g = Interleaved();
  g.nvlink_islands = {Bits(0x33), Bits(0xcc), Bits(0x10)};
  EXPECT_EQ(ErrorOf(g), "nvlink_islands[2] '4': GPU 4 is also in nvlink_islands[0] '0-1+4-5'");
}

TEST(GpuTopologyGroupsTest, IslandsMaySpanSocketsAndLeaveGpusOut) {
  GpuGroups g = Interleaved();
  g.nvlink_islands = {Bits(0x33), Bits(0x0c)};
  EXPECT_EQ(ErrorOf(g), "OK: gpus=8;switches=0+2,1+3,4+6,5+7;sockets=0-3,4-7;nvlink=0-1+4-5,2-3");
}

TEST(GpuTopologyGroupsTest, RandomGroupingsAreKeptExactly) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 2000; ++i) {
    GpuGroups g = testing::RandomGpuGroups(rng);
    absl::StatusOr<GpuTopology> t = GpuTopology::FromGroups(g);
    ASSERT_TRUE(t.ok()) << t.status();
    GpuGroups back = t->groups();
    EXPECT_THAT(back.switches, ::testing::UnorderedElementsAreArray(g.switches));
    EXPECT_THAT(back.sockets, ::testing::UnorderedElementsAreArray(g.sockets));
    EXPECT_THAT(back.nvlink_islands, ::testing::UnorderedElementsAreArray(g.nvlink_islands));
    for (int gpu = 0; gpu < t->gpu_count(); ++gpu) {
      ASSERT_TRUE(t->switches()[t->switch_of(gpu)].Contains(gpu));
      ASSERT_TRUE(t->sockets()[t->socket_of(gpu)].Contains(gpu));
      ASSERT_EQ(t->socket_of_switch(t->switch_of(gpu)), t->socket_of(gpu));
    }
    ASSERT_EQ(*GpuTopology::FromSpec(t->ToSpec()), *t) << t->ToSpec();
  }
}

TEST(GpuTopologyGroupsTest, TwoGpusGoToOneInterleavedSwitch) {
  GpuTopology t = *GpuTopology::FromGroups(Interleaved());
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xff, 2), "0,2 switch");
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xfa, 2), "1,3 switch");       // 0 and 2 taken
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xf1, 2), "4,6 switch");  // 1-3 taken: GPU 0 is alone on its switch
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xff, 4), "0-3 socket");
  // The same node described by ranges only (what the old wire kept) puts a
  // pair on two switches.
  GpuTopology flat = GpuTopology::Flat(8);
  EXPECT_EQ(GpuTopologyGroupsChoose(flat, 0xff, 2), "0-1 switch");
  EXPECT_NE(t.switch_of(0), t.switch_of(1));
}

TEST(GpuTopologyGroupsTest, FourGpusTakeOneInterleavedIsland) {
  // One socket, PCIe pairs 0-1, 2-3, ...; NVLink joins the even GPUs and the
  // odd GPUs. Four GPUs: one whole island, not two PCIe pairs.
  GpuTopology t = *GpuTopology::FromGroups(
      {.gpu_count = 8,
       .switches = {Bits(0x03), Bits(0x0c), Bits(0x30), Bits(0xc0)},
       .sockets = {Bits(0xff)},
       .nvlink_islands = {Bits(0x55), Bits(0xaa)}});
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xff, 4), "0,2,4,6 socket");
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xfe, 4), "1,3,5,7 socket");
  EXPECT_EQ(GpuTopologyGroupsChoose(t, 0xff, 2), "0-1 switch");
}

// The links of a node whose groups are `t`'s: PIX inside a switch, NODE
// inside a socket, SYS across; NVLink between the GPUs of each island.
GpuLinkMatrix LinksOf(const GpuTopology& t) {
  const int n = t.gpu_count();
  GpuLinkMatrix m{.pcie = std::vector<std::vector<PcieLink>>(n, std::vector<PcieLink>(n)),
                  .nvlink = std::vector<uint64_t>(n, 0)};
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      m.pcie[a][b] = t.switch_of(a) == t.switch_of(b)   ? PcieLink::kSingleSwitch
                     : t.socket_of(a) == t.socket_of(b) ? PcieLink::kNumaNode
                                                        : PcieLink::kSystem;
    }
  }
  for (GpuSet island : t.nvlink_islands()) {
    for (int g : island.Indices()) m.nvlink[g] = (island - GpuSet(uint64_t{1} << g)).bits();
  }
  return m;
}

TEST(GpuTopologyGroupsTest, LinkMatrixWithInterleavedSwitchPairs) {
  using L = PcieLink;
  // Fabricated 4-GPU box: PIX pairs 0-2 and 1-3, PXB between them, one
  // socket; GPUs 0 and 1 share a board (internal).
  GpuLinkMatrix m{.pcie = {{L::kInternal, L::kInternal, L::kSingleSwitch, L::kMultipleSwitches},
                           {L::kInternal, L::kInternal, L::kMultipleSwitches, L::kSingleSwitch},
                           {L::kSingleSwitch, L::kMultipleSwitches, L::kInternal, L::kHostBridge},
                           {L::kMultipleSwitches, L::kSingleSwitch, L::kHostBridge, L::kInternal}}};
  absl::StatusOr<GpuTopology> t = GpuTopology::FromLinkMatrix(m);
  ASSERT_TRUE(t.ok()) << t.status();
  // 0-1 internal joins the two PIX pairs into one group.
  EXPECT_EQ(t->ToSpec(), "gpus=4;switches=0-3;sockets=0-3");
  m.pcie[0][1] = m.pcie[1][0] = L::kMultipleSwitches;
  t = GpuTopology::FromLinkMatrix(m);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=4;switches=0+2,1+3;sockets=0-3");
  EXPECT_FALSE(t->has_nvlink());
}

TEST(GpuTopologyGroupsTest, LinkMatrixOfEightGpusAcrossTwoSockets) {
  GpuGroups g = Interleaved();
  g.nvlink_islands = {Bits(0x33), Bits(0xcc)};
  GpuTopology want = *GpuTopology::FromGroups(g);
  absl::StatusOr<GpuTopology> t = GpuTopology::FromLinkMatrix(LinksOf(want));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0+2,1+3,4+6,5+7;sockets=0-3,4-7;nvlink=0-1+4-5,2-3+6-7");
}

TEST(GpuTopologyGroupsTest, LinkMatrixOfRandomGroupingsGivesThemBack) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    GpuTopology want = *GpuTopology::FromGroups(testing::RandomGpuGroups(rng));
    absl::StatusOr<GpuTopology> t = GpuTopology::FromLinkMatrix(LinksOf(want));
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_EQ(*t, want) << want.ToSpec() << " came back as " << t->ToSpec();
  }
}

TEST(GpuTopologyGroupsTest, BadLinkMatricesAreRefusedNamingThePair) {
  using L = PcieLink;
  auto error = [](const GpuLinkMatrix& m) {
    absl::StatusOr<GpuTopology> t = GpuTopology::FromLinkMatrix(m);
    return t.ok() ? "OK: " + t->ToSpec() : std::string(t.status().message());
  };
  EXPECT_EQ(error({}), "OK: gpus=0");
  EXPECT_EQ(error({.pcie = {{L::kInternal, L::kSystem}, {L::kSystem}}}),
            "link matrix: row GPU1 has 1 entries, not 2");
  EXPECT_EQ(error({.pcie = {{L::kInternal, L::kSingleSwitch}, {L::kSystem, L::kInternal}}}),
            "link matrix: GPU0-GPU1 is PIX but GPU1-GPU0 is SYS");
  EXPECT_EQ(error({.pcie = {{L::kInternal, L::kSystem}, {L::kSystem, L::kInternal}},
                   .nvlink = {0x2, 0x0}}),
            "link matrix: NVLink between GPU0 and GPU1 is given one way only");
  EXPECT_EQ(error({.pcie = {{L::kInternal}}, .nvlink = {0x1, 0x0}}),
            "link matrix: nvlink has 2 rows, not 1");
  EXPECT_EQ(error({.pcie = {{L::kInternal}}, .nvlink = {0x4}}),
            "link matrix: NVLink of GPU0 names GPUs outside the node's 1");
  GpuLinkMatrix wide{.pcie = std::vector<std::vector<PcieLink>>(65, std::vector<PcieLink>(65))};
  EXPECT_EQ(error(wide), "link matrix: 65 GPUs; a node has at most 64");
}

}  // namespace
}  // namespace trainyard::core
