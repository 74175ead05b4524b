// Tests that topology crosses the wire group for group: core -> proto ->
// core is the identity for random valid topologies (seeded), groups that are
// not ranges survive, and a proto topology that does not validate is refused
// naming the field (registration itself: server/job_manager_test.cc).
#include <random>

#include "api/convert.h"
#include "core/resources/gpu_topology_testing.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;

v1::GpuTopology Proto(int gpus, std::vector<uint64_t> switches, std::vector<uint64_t> sockets,
                      std::vector<uint64_t> islands = {}) {
  v1::GpuTopology p;
  p.set_gpu_count(gpus);
  for (uint64_t g : switches) p.add_switches(g);
  for (uint64_t g : sockets) p.add_sockets(g);
  for (uint64_t g : islands) p.add_nvlink_islands(g);
  return p;
}

TEST(ConvertTopologyTest, InterleavedSwitchesSurviveTheWire) {
  v1::GpuTopology p = Proto(8, {0x05, 0x0a, 0x50, 0xa0}, {0x0f, 0xf0}, {0x33, 0xcc});
  absl::StatusOr<core::GpuTopology> t = ToCore(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToSpec(), "gpus=8;switches=0+2,1+3,4+6,5+7;sockets=0-3,4-7;nvlink=0-1+4-5,2-3+6-7");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToProto(*t), p));
}

TEST(ConvertTopologyTest, RandomTopologiesRoundTripExactly) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<core::GpuTopology> t =
        core::GpuTopology::FromGroups(core::testing::RandomGpuGroups(rng));
    ASSERT_TRUE(t.ok()) << t.status();
    v1::GpuTopology p = ToProto(*t);
    absl::StatusOr<core::GpuTopology> back = ToCore(p);
    ASSERT_TRUE(back.ok()) << back.status() << " for " << t->ToSpec();
    ASSERT_EQ(*back, *t) << t->ToSpec() << " came back as " << back->ToSpec();
    ASSERT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToProto(*back), p));
  }
}

TEST(ConvertTopologyTest, GroupsInAnyOrderGiveTheSameTopology) {
  absl::StatusOr<core::GpuTopology> a = ToCore(Proto(8, {0xa0, 0x05, 0x50, 0x0a}, {0xf0, 0x0f}));
  absl::StatusOr<core::GpuTopology> b = ToCore(Proto(8, {0x05, 0x0a, 0x50, 0xa0}, {0x0f, 0xf0}));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(ConvertTopologyTest, InvalidTopologiesAreRefusedNotFlattened) {
  auto error = [](const v1::GpuTopology& p) {
    absl::StatusOr<core::GpuTopology> t = ToCore(p);
    return t.ok() ? "OK: " + t->ToSpec() : std::string(t.status().message());
  };
  EXPECT_EQ(error(Proto(8, {0x05, 0x0a, 0x54, 0xa0}, {0x0f, 0xf0})),
            "switches[2] '2+4+6': GPU 2 is also in switches[0] '0+2'");
  EXPECT_EQ(error(Proto(8, {0x11, 0x22, 0x44, 0x88}, {0x0f, 0xf0})),
            "switches[0] '0+4': spans sockets[0] '0-3' and sockets[1] '4-7'; a switch must sit "
            "inside one socket");
  EXPECT_EQ(error(Proto(4, {0x3, 0xc}, {0x1f})),
            "sockets[0] '0-4': has GPUs outside the node's 4 GPUs (4)");
  EXPECT_EQ(error(Proto(4, {0x3, 0xc}, {0xf}, {0x3, 0x6})),
            "nvlink_islands[1] '1-2': GPU 1 is also in nvlink_islands[0] '0-1'");
}

TEST(ConvertTopologyTest, NodeSpecNamesTheNodeAndTheField) {
  v1::NodeInfo info;
  info.set_name("n1");
  info.mutable_capacity()->set_gpus(4);
  *info.mutable_topology() = Proto(4, {0x3, 0x6}, {0xf});
  absl::StatusOr<core::NodeSpec> spec = ToNodeSpec(info);
  EXPECT_THAT(spec.status().message(),
              HasSubstr("node n1: topology.switches[1] '1-2': GPU 1 is also in switches[0] '0-1'"));
  *info.mutable_topology() = Proto(4, {0x5, 0xa}, {0xf});
  spec = ToNodeSpec(info);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->topology.ToSpec(), "gpus=4;switches=0+2,1+3;sockets=0-3");
}

}  // namespace
}  // namespace trainyard::api
