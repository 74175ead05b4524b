// The client verbs as a user runs them against a real server: filters on
// `jobs`, `kill` of several jobs, `delete` freeing a name, `describe`'s
// times, `-o json` types, and control characters escaped.
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

std::string Sleeper(const std::string& name, const std::string& user) {
  return absl::StrCat("name: ", name, "\nuser: ", user, "\nreplicas:\n  worker:\n    count: 1\n",
                      "    resources: {cpu: 100m, memory: 64Mi, gpus: 1}\n    command: [sleep, '600']\n");
}

std::vector<std::string> Names(Cluster& c, std::vector<std::string> args) {
  args.insert(args.begin(), "jobs");
  args.push_back("-o");
  args.push_back("json");
  CommandResult r = c.Cli(args);
  std::vector<std::string> out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return {"unreadable: " + r.out + r.err};
  for (const auto& job : j.value("jobs", nlohmann::json::array())) out.push_back(job.value("name", ""));
  return out;
}

TEST(CliTest, FiltersKillOfSeveralJobsDeleteAndJsonTypes) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string a = c.Submit(Sleeper("a", "alice")), b = c.Submit(Sleeper("b", "bob")),
              d = c.Submit(Sleeper("d", "alice"));
  ASSERT_TRUE(c.WaitForState(a, "RUNNING") && c.WaitForState(b, "RUNNING") && c.WaitForState(d, "RUNNING"));
  EXPECT_THAT(Names(c, {"--user", "alice"}), UnorderedElementsAre("a", "d"));
  EXPECT_THAT(Names(c, {"--user", "bob", "--state", "queued,running"}), UnorderedElementsAre("b"));
  EXPECT_THAT(Names(c, {"--queue", "nope"}), UnorderedElementsAre());
  CommandResult r = c.Cli({"jobs", "--state", "sleeping"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'sleeping' is not one of"));

  r = c.Cli({"kill", "a", "b", "nope"});
  EXPECT_EQ(r.exit_code, 1) << "one of them does not exist";
  EXPECT_THAT(r.out, HasSubstr("job a: KILLED"));
  EXPECT_THAT(r.out, HasSubstr("job b: KILLED"));
  EXPECT_THAT(r.err, HasSubstr("job 'nope' does not exist"));
  EXPECT_THAT(Names(c, {"--state", "killed"}), UnorderedElementsAre("a", "b")) << "a finished state implies -a";

  nlohmann::json j = c.Describe(a);
  EXPECT_TRUE(j["id"].is_number()) << j.dump(1);
  EXPECT_TRUE(j["submit_time_unix_ms"].is_number());
  EXPECT_EQ(j["state"], "KILLED");
  EXPECT_EQ(j["priority"], "iteration");
  nlohmann::json worker;
  for (const auto& t : j["tasks"]) {
    if (t["role"] == "worker") worker = t;
  }
  ASSERT_TRUE(worker.is_object()) << j.dump(1);
  EXPECT_EQ(worker["gpu_mask_indices"].size(), 1u) << worker.dump();
  EXPECT_TRUE(worker["gpu_mask"].is_number());
  EXPECT_TRUE(worker["memory_mb"].is_number());
  r = c.Cli({"describe", d});
  EXPECT_THAT(r.out, HasSubstr("Started:    20"));
  EXPECT_THAT(r.out, HasSubstr("Ended:      -"));
  EXPECT_THAT(r.out, HasSubstr("(running)"));
  r = c.Cli({"describe", a});
  EXPECT_THAT(r.out, Not(HasSubstr("Ended:      -")));

  // A name is free again after `delete`; a live job is not deleted.
  r = c.Cli({"delete", d});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("kill it first"));
  // A killed job is deleted once its tasks have stopped; until then delete
  // says so, and a user tries again.
  ASSERT_TRUE(WaitUntil([&] {
    r = c.Cli({"delete", a});
    EXPECT_TRUE(r.exit_code == 0 || absl::StrContains(r.err, "is still stopping its tasks")) << r.err;
    return r.exit_code == 0;
  }, absl::Seconds(30), absl::Milliseconds(100))) << r.err << c.Describe(a).dump(1);
  EXPECT_THAT(r.out, HasSubstr("kept in the store as a#"));
  EXPECT_EQ(c.Cli({"describe", a}).exit_code, 1);
  EXPECT_EQ(c.Submit(Sleeper("a", "alice")), "a") << "the name is reused, not suffixed";
  EXPECT_TRUE(c.WaitForState("a", "RUNNING")) << c.Describe("a").dump(1);
  EXPECT_EQ(c.Submit(Sleeper("b", "bob")), "b-2") << "a killed job that was not deleted keeps its name";
  uint64_t new_id = c.Describe("a").value("id", uint64_t{0});
  EXPECT_NE(new_id, j.value("id", uint64_t{0}));
  ASSERT_TRUE(c.RestartServer());
  EXPECT_EQ(c.Describe("a").value("id", uint64_t{0}), new_id) << "after a restart too, the name is the new job's";
}

TEST(CliTest, ControlCharactersInUserNamesAreEscapedWhenPrinted) {
  Cluster c({.nodes = 1});
  ASSERT_TRUE(c.WaitNodesReady(1));
  std::string job = c.Submit(Sleeper("esc", "\"eve\\e[2J\\nroot\""));
  ASSERT_FALSE(job.empty());
  for (const auto& args : {std::vector<std::string>{"jobs"}, std::vector<std::string>{"describe", job}}) {
    CommandResult r = c.Cli(args);
    EXPECT_THAT(r.out, HasSubstr("eve\\x1b[2J\\nroot")) << r.out;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no raw escape reaches the terminal";
  }
}

// `--config FILE` with flags on top: the flags win (the harness's --listen
// and --data-dir over the file's), and the file's camelCase queue config
// with its default queue is what jobs that name no queue go to.
TEST(CliTest, ServerFlagsOverrideTheConfigFileAndTheQueueFileSetsTheDefaultQueue) {
  TempDir files;
  std::string queues = files.path() + "/queues.yaml", config = files.path() + "/server.yaml";
  WriteFile(queues, "policy: capacity\ndefaultQueue: research\nqueues:\n"
                    "  - {name: research, capacity: 60, maxCapacity: 100, userLimit: 100}\n"
                    "  - {name: prod, capacity: 40, minShare: {cpu: 1, memory: 1Gi}}\n");
  WriteFile(config, absl::StrCat("listen: 127.0.0.1:1\ndataDir: ", files.path(), "/not-this-one\nqueueConfig: ",
                                 queues, "\n"));
  Cluster c({.nodes = 1, .server_flags = {"--config", config}});
  ASSERT_TRUE(c.WaitNodesReady(1)) << "the server listens where --listen says, not where the file does";
  std::string job = c.Submit(Sleeper("noqueue", "alice"));
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(c.Describe(job).value("queue", ""), "research");
  EXPECT_THAT(c.Cli({"queues"}).out, HasSubstr("prod"));
  EXPECT_FALSE(std::filesystem::exists(files.path() + "/not-this-one")) << "--data-dir wins over dataDir";
}

}  // namespace
}  // namespace trainyard::testing
