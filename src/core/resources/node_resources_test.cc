// Tests for NodeResources: creating a node, placing requests (memory, vcores,
// GPUs, ports) with pending-reason messages, Allocate / Release with double
// allocation and double release detection, and a seeded randomized property
// test over long allocate / release sequences on several nodes.
#include "core/resources/node_resources.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::core {
namespace {

using ::testing::HasSubstr;

constexpr char kNodeResourcesDgx[] = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7";

Resource Capacity(int gpus, std::string_view ports = "30000-30099") {
  Resource r;
  r.memory_mb = 64 * 1024;
  r.vcores_milli = 32 * 1000;
  r.gpus = gpus;
  r.ports = PortRanges::Parse(ports).value();
  return r;
}

NodeResources NodeResourcesNode(const std::string& spec = kNodeResourcesDgx, int gpus = 8) {
  return NodeResources::Create(Capacity(gpus), GpuTopology::FromSpec(spec).value()).value();
}

Resource Request(int64_t mem, int64_t vcores, int gpus, uint64_t mask = 0, int port_count = 0,
                 std::string_view ports = "") {
  Resource r;
  r.memory_mb = mem;
  r.vcores_milli = vcores;
  r.gpus = gpus;
  r.gpu_mask = mask;
  r.port_count = port_count;
  r.ports = PortRanges::Parse(ports).value();
  return r;
}

std::string Error(const NodeResources& node, const Resource& request,
                  PlacementOptions options = {}) {
  absl::StatusOr<TaskPlacement> p = PlaceOnNode(node, request, options);
  return p.ok() ? "OK " + p->allocation.ToString() : std::string(p.status().message());
}

TEST(NodeResourcesTest, CreateStartsAllFree) {
  NodeResources node = NodeResourcesNode();
  EXPECT_EQ(node.free.gpus, 8);
  EXPECT_EQ(node.free.gpu_mask, 0xffu);
  EXPECT_EQ(node.capacity.gpu_mask, 0xffu);
  EXPECT_EQ(node.free.ports.ToString(), "30000-30099");
}

TEST(NodeResourcesTest, CreateKeepsExcludedGpusOut) {
  Resource cap = Capacity(8);
  cap.gpu_mask = 0b1111'0111;  // GPU 3 busy with an unknown process
  NodeResources node = NodeResources::Create(cap, GpuTopology::FromSpec(kNodeResourcesDgx).value()).value();
  EXPECT_EQ(node.free.gpus, 7);
  EXPECT_EQ(Error(node, Request(0, 0, 1, 0b1000)), "gpu_mask: GPUs 3 are excluded on this node");
  EXPECT_EQ(Error(node, Request(0, 0, 1)), "OK memory=0MB vcores=0 gpus=1 mask=2");
}

TEST(NodeResourcesTest, CreateRejectsBadCapacity) {
  GpuTopology topo = GpuTopology::FromSpec(kNodeResourcesDgx).value();
  EXPECT_THAT(NodeResources::Create(Capacity(4), topo).status().message(),
              HasSubstr("gpus is 4 but the topology has 8 GPUs"));
  EXPECT_THAT(NodeResources::Create(Capacity(65), GpuTopology::Flat(64)).status().message(),
              HasSubstr("gpus: 65 is above the maximum 64"));
  Resource negative = Capacity(8);
  negative.memory_mb = -1;
  EXPECT_THAT(NodeResources::Create(negative, topo).status().message(),
              HasSubstr("node capacity: memory_mb: -1 is negative"));
  Resource outside = Capacity(8);
  outside.gpu_mask = 0x1ff;
  EXPECT_THAT(NodeResources::Create(outside, topo).status().message(),
              HasSubstr("gpu_mask: GPUs 8 are outside the node's 8 GPUs"));
}

TEST(NodeResourcesTest, PlacesEveryQuantity) {
  absl::StatusOr<TaskPlacement> p =
      PlaceOnNode(NodeResourcesNode(), Request(4096, 2500, 2, 0, 2, "30050-30051"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->allocation.ToString(),
            "memory=4096MB vcores=2.5 gpus=2 mask=0-1 ports=30000-30001,30050-30051");
  EXPECT_EQ(p->tightness, Tightness::kSwitch);
}

TEST(NodeResourcesTest, PendingReasonsNameWhatIsShort) {
  NodeResources node = NodeResourcesNode();
  EXPECT_EQ(Error(node, Request(70000, 0, 0)), "needs 70000 MB of memory; 65536 MB free of 65536");
  EXPECT_EQ(Error(node, Request(0, 40500, 0)), "needs 40.5 vcores; 32 free of 32");
  EXPECT_EQ(Error(node, Request(0, 0, 0, 0, 0, "80")),
            "ports: 80 are outside this node's range 30000-30099");
  EXPECT_EQ(Error(node, Request(0, 0, 0, 0, 101)), "needs 101 ports; 100 are free");
  ASSERT_TRUE(Allocate(&node, PlaceOnNode(node, Request(0, 0, 6, 0b1101'1011, 0, "30005"))
                                  ->allocation)
                  .ok());
  EXPECT_EQ(Error(node, Request(0, 0, 0, 0, 0, "30004-30006")), "ports: 30005 are in use");
  EXPECT_EQ(Error(node, Request(0, 0, 4)), "needs 4 GPUs; 2 are free (GPUs 2,5)");
  EXPECT_EQ(Error(node, Request(0, 0, 2), {.loosest = Tightness::kSwitch}),
            "needs 2 GPUs under one PCIe switch; the best free group is 1 (GPUs 2)");
  EXPECT_EQ(Error(node, Request(0, 0, 2), {.loosest = Tightness::kSocket}),
            "needs 2 GPUs within one socket; the best free group is 1 (GPUs 2)");
  EXPECT_EQ(Error(node, Request(0, 0, 2, 0b11)), "gpu_mask: GPUs 0-1 of 0-1 are in use; "
                                                 "free GPUs: 2,5");
}

TEST(NodeResourcesTest, InvalidRequestsAreInvalidArgument) {
  NodeResources node = NodeResourcesNode();
  EXPECT_EQ(PlaceOnNode(node, Request(0, 0, 2, 0b111)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceOnNode(node, Request(0, 0, 9)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(node, Request(-5, 0, 0)), "memory_mb: -5 is negative");
  EXPECT_EQ(Error(node, Request(0, 0, 0, 0, -1)), "port_count: -1 is negative");
}

TEST(NodeResourcesTest, DoubleAllocationFailsAndChangesNothing) {
  NodeResources node = NodeResourcesNode();
  Resource a = PlaceOnNode(node, Request(1024, 1000, 2, 0, 1))->allocation;
  ASSERT_TRUE(Allocate(&node, a).ok());
  NodeResources before = node;
  absl::Status again = Allocate(&node, a);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("gpu_mask: GPUs 0-1 are not free (allocated twice?)"));
  EXPECT_EQ(node.free, before.free);
  Resource ports_only = Request(0, 0, 0, 0, 0, "30000");
  EXPECT_THAT(Allocate(&node, ports_only).message(), HasSubstr("ports: 30000 are not free"));
  EXPECT_EQ(node.free, before.free);
}

TEST(NodeResourcesTest, DoubleReleaseFailsAndChangesNothing) {
  NodeResources node = NodeResourcesNode();
  Resource a = PlaceOnNode(node, Request(1024, 1000, 2, 0, 1))->allocation;
  ASSERT_TRUE(Allocate(&node, a).ok());
  ASSERT_TRUE(Release(&node, a).ok());
  EXPECT_EQ(node.free, node.capacity);
  absl::Status again = Release(&node, a);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("would free more than is in use"));
  EXPECT_EQ(node.free, node.capacity);
  EXPECT_THAT(Release(&node, Request(0, 0, 1, 0b1)).message(),
              HasSubstr("gpu_mask: GPUs 0 are already free (released twice?)"));
  EXPECT_THAT(Release(&node, Request(0, 0, 0, 0, 0, "30000")).message(),
              HasSubstr("ports: 30000 are already free"));
  EXPECT_THAT(Release(&node, Request(0, 0, 1, 0x100)).message(),
              HasSubstr("gpu_mask: GPUs 8 are not this node's"));
  EXPECT_THAT(Release(&node, Request(0, 0, 0, 0, 0, "80")).message(),
              HasSubstr("ports: 80 are not this node's"));
  EXPECT_EQ(node.free, node.capacity);
}

TEST(NodeResourcesTest, MalformedAllocationsAreInvalidArgument) {
  NodeResources node = NodeResourcesNode();
  EXPECT_THAT(Allocate(&node, Request(0, 0, 2, 0b1)).message(),
              HasSubstr("allocation: gpus 2 does not match gpu_mask 0 (1 GPUs)"));
  EXPECT_THAT(Allocate(&node, Request(0, 0, 0, 0, 3)).message(),
              HasSubstr("port_count is set"));
  EXPECT_EQ(Release(&node, Request(-1, 0, 0)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(node.free, node.capacity);
}

// Brute force: the tightest level at which `n` GPUs of `free` exist.
Tightness TightestBySubsets(const GpuTopology& t, uint64_t free, int n) {
  Tightness best = Tightness::kNone;
  for (uint64_t sub = free;; sub = (sub - 1) & free) {
    if (BitCount(sub) == n) {
      Tightness level = TightnessOf(t, GpuSet(sub));
      if (best == Tightness::kNone || level < best) best = level;
    }
    if (sub == 0) break;
  }
  return best;
}

struct Held {
  int node;
  Resource allocation;
};

// Checks that held allocations and free resources partition each node.
void CheckConservation(const std::vector<NodeResources>& nodes, const std::vector<Held>& held) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    Resource sum = nodes[i].free;
    for (const Held& h : held) {
      if (h.node != static_cast<int>(i)) continue;
      ASSERT_EQ(sum.gpu_mask & h.allocation.gpu_mask, 0u) << "a GPU is handed out twice";
      ASSERT_TRUE(sum.ports.Intersect(h.allocation.ports).Empty()) << "a port is handed out twice";
      sum = Add(sum, h.allocation);
    }
    ASSERT_EQ(sum.memory_mb, nodes[i].capacity.memory_mb);
    ASSERT_EQ(sum.vcores_milli, nodes[i].capacity.vcores_milli);
    ASSERT_EQ(sum.gpu_mask, nodes[i].capacity.gpu_mask);
    ASSERT_EQ(sum.ports, nodes[i].capacity.ports);
    ASSERT_EQ(nodes[i].free.gpus, BitCount(nodes[i].free.gpu_mask));
  }
}

Resource RandomRequest(std::mt19937_64& rng, const NodeResources& node) {
  Resource r;
  r.memory_mb = (rng() % 16) * 1024;
  r.vcores_milli = (rng() % 9) * 500;
  static constexpr int kGpuSizes[] = {0, 1, 1, 1, 2, 2, 3, 4, 8};
  r.gpus = std::min(kGpuSizes[rng() % 9], node.topology.gpu_count());
  if (r.gpus > 0 && rng() % 5 == 0) {  // a locality request for some free (or not) GPUs
    r.gpu_mask = GpuSet(node.free.gpu_mask | (rng() & node.capacity.gpu_mask)).LowestN(r.gpus).bits();
    r.gpus = BitCount(r.gpu_mask);
  }
  r.port_count = static_cast<int>(rng() % 4);
  if (rng() % 6 == 0) {
    uint32_t p = 30000 + static_cast<uint32_t>(rng() % 100);
    r.ports = PortRanges::Of(p, p).value();
  }
  return r;
}

TEST(NodeResourcesTest, RandomAllocateReleaseNeverDoubleBooksOrLeaks) {
  const std::vector<std::string> specs = {kNodeResourcesDgx, "switches=0-3,4-7;sockets=0-7",
                                          "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7;nvlink=0-3,4-7",
                                          "gpus=8;sockets=0-1,2-3,4-5,6-7"};
  std::vector<NodeResources> nodes, fresh;
  for (const std::string& spec : specs) nodes.push_back(NodeResourcesNode(spec));
  fresh = nodes;
  std::mt19937_64 rng(20261129);
  std::vector<Held> held;
  int placed = 0;
  for (int step = 0; step < 20000; ++step) {
    if (!held.empty() && (rng() % 100 < 45 || held.size() > 40)) {
      size_t k = rng() % held.size();
      const Resource& a = held[k].allocation;
      ASSERT_TRUE(Release(&nodes[held[k].node], a).ok());
      NodeResources before = nodes[held[k].node];
      // A second release of GPUs or ports must fail and change nothing
      // (bare memory may still be in use by others, so it can succeed).
      if (a.gpus > 0 || !a.ports.Empty()) {
        ASSERT_FALSE(Release(&nodes[held[k].node], a).ok());
      }
      ASSERT_EQ(nodes[held[k].node].free, before.free);
      held.erase(held.begin() + k);
    } else {
      int n = static_cast<int>(rng() % nodes.size());
      Resource request = RandomRequest(rng, nodes[n]);
      absl::StatusOr<TaskPlacement> p = PlaceOnNode(nodes[n], request);
      if (!p.ok()) continue;
      ASSERT_TRUE(FitsIn(p->allocation, nodes[n].free));
      if (request.gpu_mask == 0 && request.gpus > 0) {
        ASSERT_EQ(p->tightness,
                  TightestBySubsets(nodes[n].topology, nodes[n].free.gpu_mask, request.gpus))
            << "a looser level than an available tighter one";
      }
      ASSERT_TRUE(Allocate(&nodes[n], p->allocation).ok());
      if (p->allocation.gpus > 0 || !p->allocation.ports.Empty()) {
        ASSERT_FALSE(Allocate(&nodes[n], p->allocation).ok());  // double allocation
      }
      held.push_back({n, p->allocation});
      ++placed;
    }
    CheckConservation(nodes, held);
  }
  EXPECT_GT(placed, 5000);
  for (const Held& h : held) ASSERT_TRUE(Release(&nodes[h.node], h.allocation).ok());
  for (size_t i = 0; i < nodes.size(); ++i) EXPECT_EQ(nodes[i].free, fresh[i].free);
}

}  // namespace
}  // namespace trainyard::core
