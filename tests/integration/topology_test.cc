// GPU topology end to end: an agent whose PCIe switches pair GPUs that no
// range can name (0+2, 1+3, ...) registers with a real server, which keeps
// the grouping and places each 2-GPU task on one switch; the tasks' own
// CUDA_VISIBLE_DEVICES shows it.
#include <sys/stat.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

constexpr char kInterleaved[] = "switches=0+2,1+3,4+6,5+7;sockets=0-3,4-7";

std::string EnvLine(const std::string& env_text, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(env_text, '\n')) {
    if (absl::ConsumePrefix(&line, key + "=")) return std::string(line);
  }
  return "";
}

TEST(TopologyTest, TwoGpuTasksGetOneSwitchOfANonContiguousGrouping) {
  Cluster c({.nodes = 1, .topology = kInterleaved});
  ASSERT_TRUE(c.WaitNodesReady(1)) << ReadFile(c.server().log());
  // The node view carries the groups as given (bitmaps 0x5, 0xa, 0x50, 0xa0).
  nlohmann::json nodes = c.Nodes();
  ASSERT_EQ(nodes["nodes"].size(), 1u) << nodes.dump(2);
  EXPECT_EQ(nodes["nodes"][0]["info"]["topology"]["switches"],
            nlohmann::json::array({5, 10, 80, 160}));
  std::string out = c.dir() + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  std::string job = c.Submit(absl::StrCat(R"(
name: pairs
replicas:
  worker:
    count: 2
    resources: {gpus: 2, cpu: 1, memory: 256Mi}
    env: {OUT: ")", out, R"("}
    command: [sh, -c, 'env > $OUT/$TRAINYARD_TASK_NAME.env']
)"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  const std::set<std::string> switches = {"0,2", "1,3", "4,6", "5,7"};
  std::set<std::string> seen;
  nlohmann::json d = c.Describe(job);
  for (const auto& t : d["tasks"]) {
    if (t["role"] != "worker") continue;
    std::string devices =
        EnvLine(ReadFile(out + "/" + t["name"].get<std::string>() + ".env"), "CUDA_VISIBLE_DEVICES");
    EXPECT_TRUE(switches.count(devices)) << t["name"] << " got CUDA_VISIBLE_DEVICES=" << devices
                                         << ", not one switch of " << kInterleaved;
    seen.insert(devices);
  }
  EXPECT_EQ(seen.size(), 2u) << d.dump(2);  // two tasks, two different switches
  EXPECT_TRUE(seen.count("0,2")) << "the first pair is the lowest switch";
}

}  // namespace
}  // namespace trainyard::testing
