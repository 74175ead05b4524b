// Tests for ChooseGpus / BestTightness: the tightness rule, the best-fit
// fragmentation rule (with the example from the design), NVLink islands,
// locality requests, errors, and a brute-force check over every free mask and
// every subset of 8-GPU nodes.
#include "core/resources/gpu_placement.h"

#include <algorithm>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;

GpuTopology Topo(const std::string& spec) {
  absl::StatusOr<GpuTopology> t = GpuTopology::FromSpec(spec);
  EXPECT_TRUE(t.ok()) << spec << ": " << t.status();
  return t.ok() ? *t : GpuTopology();
}

GpuSet Set(const std::string& text) { return GpuSet::Parse(text).value(); }

const char kDgx[] = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7";

// Returns "2 switch" for a choice, or the error message.
std::string Choose(const GpuTopology& topo, const std::string& free, int count,
                   uint64_t mask = 0) {
  absl::StatusOr<GpuChoice> c = ChooseGpus(topo, Set(free), count, mask);
  if (!c.ok()) return std::string(c.status().message());
  return c->gpus.ToString() + " " + TightnessName(c->tightness);
}

TEST(GpuPlacementTest, OneGpuTakesTheHalfUsedSwitch) {
  // The example of the design: free {0,1,2,4,5,6,7}; GPU 2 keeps three pairs.
  EXPECT_EQ(Choose(Topo(kDgx), "0-2,4-7", 1), "2 switch");
}

TEST(GpuPlacementTest, TheTableInDocsResources) {
  GpuTopology t = Topo(kDgx);
  EXPECT_EQ(Choose(t, "0-2,4-7", 1), "2 switch");
  EXPECT_EQ(Choose(t, "0-2,4-7", 2), "0-1 switch");
  EXPECT_EQ(Choose(t, "0-2,4-7", 3), "0-2 socket");
  EXPECT_EQ(Choose(t, "0-2,4-7", 4), "4-7 socket");
  EXPECT_EQ(Choose(t, "0-2,4-7", 5), "0-2,4-5 node");
}

TEST(GpuPlacementTest, SwitchTieGoesToTheBusierSocket) {
  // Switches 0-1 and 6-7 both have 2 free; socket 4-7 has fewer free GPUs.
  EXPECT_EQ(Choose(Topo(kDgx), "0-3,6-7", 2), "6-7 switch");
  EXPECT_EQ(Choose(Topo(kDgx), "0-7", 2), "0-1 switch");
}

TEST(GpuPlacementTest, SocketLevelTakesTheFullestSocketThatFitsLeast) {
  EXPECT_EQ(Choose(Topo(kDgx), "0-2,4-7", 3), "0-2 socket");
  EXPECT_EQ(Choose(Topo(kDgx), "0-2,4-7", 4), "4-7 socket");
  EXPECT_EQ(Choose(Topo(kDgx), "0,2-3,4-6", 3), "0,2-3 socket");
}

TEST(GpuPlacementTest, InsideASocketMostUsedSwitchesGoFirst) {
  GpuTopology t = Topo("switches=0-3,4-7,8-11;sockets=0-11");
  // Switch free counts 3, 1, 3: take GPU 4 and then 0-2, keeping 8-10 whole.
  EXPECT_EQ(Choose(t, "0-2,4,8-10", 4), "0-2,4 socket");
}

TEST(GpuPlacementTest, NodeLevelFillsTheBusiestSocketFirst) {
  EXPECT_EQ(Choose(Topo(kDgx), "0,4-7", 5), "0,4-7 node");
  EXPECT_EQ(Choose(Topo(kDgx), "0-1,4-7", 5), "0-1,4-6 node");
  EXPECT_EQ(Choose(Topo(kDgx), "0-7", 8), "0-7 node");
}

TEST(GpuPlacementTest, NvlinkIslandsRefineTheChoiceAtTheSameLevel) {
  GpuTopology bridged = Topo("switches=0-3,4-7;sockets=0-7;nvlink=0+2,1+3,4-5,6-7");
  EXPECT_EQ(Choose(bridged, "0-3", 2), "0,2 switch");
  EXPECT_EQ(Choose(Topo("switches=0-3,4-7;sockets=0-7"), "0-3", 2), "0-1 switch");
  // Socket level: socket∩island candidates come before the whole socket.
  GpuTopology islands = Topo("gpus=8;sockets=0-7;nvlink=0+4,1-3");
  EXPECT_EQ(Choose(islands, "0-4", 2), "0,4 socket");
  // Node level: one island before the whole node.
  GpuTopology across = Topo("gpus=4;sockets=0-1,2-3;nvlink=0+2,1+3");
  EXPECT_EQ(Choose(across, "0-3", 2), "0-1 socket");
  EXPECT_EQ(Choose(across, "1-2", 2), "1-2 node");
  EXPECT_EQ(Choose(Topo("gpus=6;sockets=0-2,3-5;nvlink=0+3,1+2+4+5"), "0-2,4-5", 4),
            "1-2,4-5 node");
  EXPECT_EQ(Choose(Topo("gpus=6;sockets=0-2,3-5"), "0-2,4-5", 4), "0-1,4-5 node");
}

TEST(GpuPlacementTest, ZeroGpusIsTightnessNone) {
  EXPECT_EQ(Choose(Topo(kDgx), "", 0), " none");
  Tightness t = Tightness::kNode;
  EXPECT_TRUE(BestTightness(Topo(kDgx), GpuSet(), 0, &t));
  EXPECT_EQ(t, Tightness::kNone);
}

TEST(GpuPlacementTest, LocalityGetsExactlyTheMask) {
  EXPECT_EQ(Choose(Topo(kDgx), "0-7", 2, 0b0011), "0-1 switch");
  EXPECT_EQ(Choose(Topo(kDgx), "0-7", 2, 0b0101), "0,2 socket");
  EXPECT_EQ(Choose(Topo(kDgx), "0-7", 2, 0b10001), "0,4 node");
  EXPECT_EQ(Choose(Topo(kDgx), "0-1,4-7", 2, 0b1100),
            "gpu_mask: GPUs 2-3 of 2-3 are in use; free GPUs: 0-1,4-7");
  EXPECT_EQ(Choose(Topo(kDgx), "", 1, 0b1), "gpu_mask: GPUs 0 of 0 are in use; no GPU is free");
}

TEST(GpuPlacementTest, InvalidRequestsAreInvalidArgument) {
  GpuTopology t = Topo(kDgx);
  auto code = [&](int count, uint64_t mask) {
    return ChooseGpus(t, t.all(), count, mask).status().code();
  };
  EXPECT_EQ(code(2, 0b111), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(9, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(-1, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(1, uint64_t{1} << 63), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Choose(t, "0-7", 3, 0b111'0000'0000), "gpu_mask: GPUs 8-10 are outside the node; "
                                                  "this node's GPUs are 0-7");
  EXPECT_EQ(Choose(t, "0-7", 2, 0b111), "gpus: 2 does not match gpu_mask 0-2 (3 GPUs)");
  EXPECT_EQ(Choose(t, "0-7", 9), "gpus: 9 is more than the node's 8 GPUs");
  EXPECT_EQ(Choose(t, "0-7", -2), "gpus: -2 is negative");
  EXPECT_EQ(Choose(GpuTopology(), "", 1, 1),
            "gpus: 1 is more than the node's 0 GPUs");
}

TEST(GpuPlacementTest, ShortageIsResourceExhausted) {
  absl::StatusOr<GpuChoice> c = ChooseGpus(Topo(kDgx), Set("2-3"), 4, 0);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().message(), "needs 4 GPUs; 2 are free (GPUs 2-3)");
  EXPECT_EQ(Choose(Topo(kDgx), "", 1), "needs 1 GPUs; 0 are free");
  // Free bits beyond the node are ignored.
  EXPECT_EQ(Choose(Topo(kDgx), "8-63", 1), "needs 1 GPUs; 0 are free");
}

TEST(GpuPlacementTest, LargestFreeGroupAndTightnessOf) {
  GpuTopology t = Topo(kDgx);
  EXPECT_EQ(LargestFreeGroup(t, Set("1,2-3,5"), Tightness::kSwitch), Set("2-3"));
  EXPECT_EQ(LargestFreeGroup(t, Set("1,5-7"), Tightness::kSocket), Set("5-7"));
  EXPECT_EQ(LargestFreeGroup(t, Set("1,5-7"), Tightness::kNode), Set("1,5-7"));
  EXPECT_EQ(TightnessOf(t, Set("6-7")), Tightness::kSwitch);
  EXPECT_EQ(TightnessOf(t, Set("")), Tightness::kNone);
  EXPECT_EQ(TightnessOf(t, Set("7-8")), Tightness::kNode);
}

// Brute force over every free mask, count and subset of an 8-GPU node.
Tightness LevelOf(const GpuTopology& t, uint64_t set) { return TightnessOf(t, GpuSet(set)); }

// The largest number of free GPUs left in one group of `level`.
int Leftover(const GpuTopology& t, uint64_t left, Tightness level) {
  return LargestFreeGroup(t, GpuSet(left), level == Tightness::kSwitch ? Tightness::kSwitch
                                                                       : Tightness::kSocket)
      .Count();
}

void CheckAgainstBruteForce(const std::string& spec, bool check_fragmentation) {
  GpuTopology t = Topo(spec);
  for (uint64_t free = 0; free < 256; ++free) {
    for (int n = 1; n <= 8; ++n) {
      Tightness best = Tightness::kNone;
      int best_left = -1;
      for (uint64_t sub = free;; sub = (sub - 1) & free) {  // every subset of free
        if (__builtin_popcountll(sub) == n) {
          Tightness level = LevelOf(t, sub);
          if (best == Tightness::kNone || level < best) {
            best = level;
            best_left = -1;
          }
          if (level == best) best_left = std::max(best_left, Leftover(t, free & ~sub, level));
        }
        if (sub == 0) break;
      }
      absl::StatusOr<GpuChoice> c = ChooseGpus(t, GpuSet(free), n, 0);
      Tightness bt = Tightness::kNone;
      bool fits = BestTightness(t, GpuSet(free), n, &bt);
      if (best == Tightness::kNone) {
        ASSERT_FALSE(c.ok()) << spec << " free=" << free << " n=" << n;
        ASSERT_FALSE(fits);
        continue;
      }
      ASSERT_TRUE(c.ok()) << spec << " free=" << free << " n=" << n << ": " << c.status();
      ASSERT_EQ(c->gpus.Count(), n);
      ASSERT_TRUE(GpuSet(free).ContainsAll(c->gpus));
      ASSERT_EQ(c->tightness, LevelOf(t, c->gpus.bits()));
      ASSERT_EQ(c->tightness, best) << spec << " free=" << free << " n=" << n;
      ASSERT_TRUE(fits);
      ASSERT_EQ(bt, best);
      if (check_fragmentation) {
        ASSERT_EQ(Leftover(t, free & ~c->gpus.bits(), best), best_left)
            << spec << " free=" << GpuSet(free).ToString() << " n=" << n
            << " chose " << c->gpus.ToString();
      }
    }
  }
}

TEST(GpuPlacementTest, NeverLooserThanBruteForceAndLeastFragmenting) {
  for (const char* spec :
       {kDgx, "switches=0-3,4-7;sockets=0-7", "gpus=8", "switches=0-1,2,3,4-5,6,7;sockets=0-3,4-7",
        "switches=0-2,3,4-7;sockets=0-3,4-7", "switches=0-7;sockets=0-7",
        "gpus=8;sockets=0-1,2-3,4-5,6-7", "switches=0+2,1+3,4-5,6-7;sockets=0-3,4-7"}) {
    CheckAgainstBruteForce(spec, /*check_fragmentation=*/true);
  }
}

TEST(GpuPlacementTest, IslandsNeverLoosenTheLevel) {
  for (const char* spec : {"switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7;nvlink=0-3,4-7",
                           "switches=0-3,4-7;sockets=0-7;nvlink=0+2,1+3,4-5,6-7",
                           "gpus=8;sockets=0-3,4-7;nvlink=0+4,1+5,2+6,3+7",
                           "switches=0-1,2-3,4-5,6-7;sockets=0-1,2-3,4-5,6-7;nvlink=0-7"}) {
    CheckAgainstBruteForce(spec, /*check_fragmentation=*/false);
  }
}

TEST(GpuPlacementTest, SixtyFourGpuNodesKeepTheRules) {
  GpuTopology t = Topo(
      "switches=0-3,4-7,8-11,12-15,16-19,20-23,24-27,28-31,32-35,36-39,40-43,44-47,48-51,"
      "52-55,56-59,60-63;sockets=0-15,16-31,32-47,48-63");
  std::mt19937_64 rng(64);
  for (int round = 0; round < 20000; ++round) {
    uint64_t free = rng() & rng();  // about a quarter free
    if (round % 2) free |= rng();   // or about five eighths
    int n = 1 + static_cast<int>(rng() % 24);
    absl::StatusOr<GpuChoice> c = ChooseGpus(t, GpuSet(free), n, 0);
    Tightness level = Tightness::kNone;
    if (!BestTightness(t, GpuSet(free), n, &level)) {
      ASSERT_FALSE(c.ok());
      ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
      continue;
    }
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->gpus.Count(), n);
    ASSERT_TRUE(GpuSet(free).ContainsAll(c->gpus));
    ASSERT_EQ(c->tightness, level);
    ASSERT_EQ(TightnessOf(t, c->gpus), level);
    if (level == Tightness::kSwitch) {  // best fit: no fitting switch has fewer free
      int chosen = (t.switches()[t.switch_of(c->gpus.Lowest())] & GpuSet(free)).Count();
      for (GpuSet s : t.switches()) {
        int f = (s & GpuSet(free)).Count();
        ASSERT_FALSE(f >= n && f < chosen);
      }
    }
  }
}

}  // namespace
}  // namespace trainyard::core
