// `trainyard up` as a new user runs it: a cluster of any GPU count that comes
// up, with the user's queues, a banner whose commands work as printed, and a
// daemon's own error on the terminal when the cluster cannot start.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// The banner line that submits the example: "  BIN submit PATH --wait".
std::vector<std::string> SubmitLine(const std::string& log) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (line.find(" submit ") == absl::string_view::npos) continue;
    std::vector<std::string> words = absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty());
    return words;
  }
  return {};
}

TEST(UpTest, FourGpusPerNodeComeUpWithTheirTopologyAndTheGivenQueues) {
  TempDir dir;
  WriteFile(dir.path() + "/queues.yaml", R"(policy: capacity
queues:
  - name: research
    capacity: 50
  - name: prod
    capacity: 50
)");
  int port = FreePortPair();
  std::string address = absl::StrCat("127.0.0.1:", port);
  Process up({TrainyardBin(), "up", "--nodes", "2", "--gpus-per-node", "4", "--port", std::to_string(port),
              "--data-dir", dir.path() + "/cluster", "--queue-config", dir.path() + "/queues.yaml"},
             dir.path() + "/up.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(up.log()).find("Press Ctrl-C") != std::string::npos || !up.Running(); },
                      absl::Seconds(40), absl::Milliseconds(50)))
      << ReadFile(up.log());
  ASSERT_TRUE(up.Running()) << ReadFile(up.log());
  std::string banner = ReadFile(up.log());
  EXPECT_THAT(banner, HasSubstr("2 nodes x 4 simulated GPUs (switches=0-1,2-3;sockets=0-1,2-3)"));
  // The dashboard's address, on a free loopback port, answers.
  const std::string dashboard = "dashboard: http://127.0.0.1:";
  size_t at = banner.find(dashboard);
  ASSERT_NE(at, std::string::npos) << banner;
  std::string http = banner.substr(at + 18, banner.find('/', at + 18) - at - 18);
  // The dashboard's URL carries the admin's token in its fragment.
  size_t token_at = banner.find("#token=", at);
  ASSERT_NE(token_at, std::string::npos) << banner;
  std::string token = banner.substr(token_at + 7, banner.find('\n', token_at) - token_at - 7);
  EXPECT_EQ(HttpGet(http, "/api/v1/nodes").status, 401) << "a token not of this cluster";
  httplib::Client client = HttpClient(http);
  client.set_default_headers({{"Authorization", "Bearer " + token}});
  HttpResult api_nodes = ToResult(client.Get("/api/v1/nodes"));
  ASSERT_EQ(api_nodes.status, 200) << http << ": " << api_nodes.body;
  ASSERT_EQ(api_nodes.json["nodes"].size(), 2u) << api_nodes.body;
  EXPECT_EQ(api_nodes.json["nodes"][0]["gpu_count"], 4);

  // up's credential: the client config it wrote, as its banner says.
  EXPECT_THAT(banner, HasSubstr("export TRAINYARD_CONFIG=" + dir.path() + "/cluster/client.yaml"));
  const std::vector<std::string> as_up = UpClientEnv(dir.path() + "/cluster");
  // Its server serves TLS with the CA up made, which the config names.
  std::string ca = dir.path() + "/cluster/certs/ca.crt";
  EXPECT_THAT(ReadFile(dir.path() + "/cluster/client.yaml"), HasSubstr("caFile: " + ca));
  CommandResult stranger =
      RunCli({"nodes", "--server", address}, absl::Seconds(20), {"TRAINYARD_TOKEN", "TRAINYARD_CA_FILE=" + ca});
  EXPECT_EQ(stranger.exit_code, 1);
  EXPECT_THAT(stranger.err, HasSubstr("requires a token"));
  CommandResult plaintext =
      RunCli({"nodes", "--server", address}, absl::Seconds(20), {"TRAINYARD_CA_FILE", "TRAINYARD_CONFIG=/dev/null"});
  EXPECT_EQ(plaintext.exit_code, 3) << plaintext.err;
  CommandResult nodes = RunCli({"nodes", "-o", "json", "--server", address}, absl::Seconds(60), as_up);
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  nlohmann::json n = nlohmann::json::parse(nodes.out);
  ASSERT_EQ(n["nodes"].size(), 2u) << nodes.out;
  for (const auto& node : n["nodes"]) {
    EXPECT_EQ(node["info"]["topology"]["gpu_count"], 4) << node.dump();
    EXPECT_THAT(node["info"].value("state", ""), HasSubstr("READY"));
  }
  CommandResult queues = RunCli({"queues", "-o", "json"}, absl::Seconds(60), as_up);
  ASSERT_EQ(queues.exit_code, 0) << queues.err;
  std::vector<std::string> names;
  nlohmann::json q = nlohmann::json::parse(queues.out);
  for (const auto& queue : q["queues"]) names.push_back(queue["name"]);
  EXPECT_THAT(names, UnorderedElementsAre("research", "prod"));

  // The banner's submit runs as printed, from another directory: the
  // binary's real path and the example's absolute path.
  std::vector<std::string> submit = SubmitLine(banner);
  ASSERT_GE(submit.size(), 3u) << banner;
  EXPECT_EQ(submit[0], std::filesystem::canonical(TrainyardBin()).string());
  EXPECT_TRUE(std::filesystem::path(submit[2]).is_absolute()) << submit[2];
  EXPECT_TRUE(std::filesystem::exists(submit[2])) << submit[2];
  WriteFile(dir.path() + "/hello.yaml", ReadFile(submit[2]) + "queue: research\n");
  CommandResult hello = RunCli({"submit", dir.path() + "/hello.yaml", "--wait", "--server", address},
                               absl::Seconds(60), as_up);
  EXPECT_EQ(hello.exit_code, 0) << hello.out << hello.err;
  EXPECT_THAT(hello.out, HasSubstr("SUCCEEDED"));
  up.Stop();
}

// The demo's verdict is its last word: printed after the worker's last log
// lines, not while they are still coming.
TEST(UpTest, TheDemoPrintsTheJobsEndAfterItsLastLogLines) {
  TempDir dir;
  WriteFile(dir.path() + "/demo.yaml", R"(name: quick
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'for i in 1 2 3 4 5 6 7 8; do echo "step $i"; done; echo "the last line"']
)");
  Process up({TrainyardBin(), "up", "--nodes", "1", "--gpus-per-node", "2", "--port", std::to_string(FreePortPair()),
              "--data-dir", dir.path() + "/cluster", "--demo", "--demo-spec", dir.path() + "/demo.yaml"},
             dir.path() + "/up.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(up.log()).find("demo: its logs") != std::string::npos || !up.Running(); },
                      absl::Seconds(60), absl::Milliseconds(50)))
      << ReadFile(up.log());
  std::string log = ReadFile(up.log());
  size_t last_line = log.find("the last line");
  size_t verdict = log.find("demo: job quick SUCCEEDED");
  ASSERT_NE(last_line, std::string::npos) << log;
  ASSERT_NE(verdict, std::string::npos) << log;
  EXPECT_LT(last_line, verdict) << log;
  EXPECT_TRUE(up.Running()) << "the cluster stays up after the demo:\n" << log;
  up.Stop();
}

TEST(UpTest, AnAgentThatCannotStartShowsItsErrorOnTheTerminal) {
  TempDir dir;
  CommandResult r = RunCli({"up", "--nodes", "1", "--gpus-per-node", "4", "--gpu-topology",
                            "switches=0-1,2-3,4-5,6-7", "--port", std::to_string(FreePortPair()), "--data-dir",
                            dir.path() + "/cluster"},
                           absl::Seconds(40));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("agent node-0 exited with code"));
  EXPECT_THAT(r.err, HasSubstr("describes 8 GPUs but --simulate-gpus is 4"));
}

TEST(UpTest, AMissingQueueConfigIsNamed) {
  TempDir dir;
  CommandResult r = RunCli({"up", "--queue-config", dir.path() + "/none.yaml", "--port", std::to_string(FreePortPair()),
                            "--data-dir", dir.path() + "/cluster"},
                           absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--queue-config " + dir.path() + "/none.yaml: no such file"));
}

TEST(UpTest, APortOfZeroIsRefusedNamingTheFlag) {
  TempDir dir;
  CommandResult r = RunCli({"up", "--port", "0", "--data-dir", dir.path() + "/cluster"}, absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--port"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/cluster")) << "nothing was started";
}

}  // namespace
}  // namespace trainyard::testing
