// A secret environment value, as a user would use one: the task gets it;
// the server's store, `describe`, `jobs -o json` and the REST API never hold
// or show it in clear.
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "tr41n-s3cret-v4lue-0f-the-user";

// Every file under `dir` that holds `needle`.
std::vector<std::string> FilesHolding(const std::string& dir, const std::string& needle) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && ReadFile(e.path()).find(needle) != std::string::npos) found.push_back(e.path());
  }
  return found;
}

TEST(SecretEnvTest, TheTaskGetsTheValueAndTheServerNeverKeepsOrShowsItInClear) {
  Cluster c({.nodes = 1});
  std::string out = c.dir() + "/seen";
  std::string job = c.Submit(std::string(R"(
name: withsecret
replicas:
  worker:
    resources: {cpu: 0.5, memory: 64Mi}
    env: {PLAIN: visible, API_KEY: {secret: ")") + kSecret + R"("}}
    command: [sh, -c, 'printf "%s %s" "$PLAIN" "$API_KEY" > )" + out + R"(']
)");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(c.WaitForState(job, "SUCCEEDED")) << c.Describe(job).dump(2);
  EXPECT_EQ(ReadFile(out), std::string("visible ") + kSecret);

  EXPECT_THAT(FilesHolding(c.server_data_dir(), kSecret), ::testing::IsEmpty());
  CommandResult describe = c.Cli({"describe", job, "-o", "json"});
  EXPECT_THAT(describe.out, Not(HasSubstr(kSecret)));
  CommandResult jobs = c.Cli({"jobs", "-a", "-o", "json"});
  EXPECT_THAT(jobs.out, HasSubstr(job));
  EXPECT_THAT(jobs.out, Not(HasSubstr(kSecret)));
  HttpResult rest = HttpGet(c.http_address(), "/api/v1/jobs/" + job);
  EXPECT_EQ(rest.status, 200) << rest.body;
  EXPECT_THAT(rest.body, Not(HasSubstr(kSecret)));
  EXPECT_THAT(ReadFile(c.server().log()), Not(HasSubstr(kSecret)));
}

TEST(SecretEnvTest, ABadSecretFormIsRefusedNamingTheField) {
  Cluster c({.nodes = 1});
  WriteFile(c.dir() + "/both.yaml", R"(
name: both
replicas:
  worker:
    command: [x]
    env: {K: plain, K2: {secret: s}}  # both fine
  ps:
    command: [x]
    env: {Z: {secret: [no]}}
)");
  CommandResult r = c.Cli({"submit", c.dir() + "/both.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("replicas.ps.env.Z: must be a string, or {secret: VALUE} for a secret value"));
}

}  // namespace
}  // namespace trainyard::testing
