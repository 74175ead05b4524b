// What a task holds of its agent: nothing that speaks for anyone. The agents
// of these clusters are started by a test process whose environment holds
// the admin's token (harness.h, AdminToken), as an admin's shell or
// `trainyard up` would; a user's task sees none of it, and a `trainyard
// submit` inside it cannot act as the admin.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(TaskCredentialsTest, AUsersTaskHoldsNoCredentialOfItsAgentAndCannotSubmitAsTheAdmin) {
  Cluster c({.nodes = 1});
  std::string out = c.dir() + "/out";
  std::filesystem::create_directories(out);
  WriteFile(out + "/inner.yaml", "name: inner\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                                 "    command: [sh, -c, 'exit 0']\n");
  WriteFile(c.dir() + "/outer.yaml", absl::StrCat(R"(name: outer
replicas:
  worker:
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'env > )", out, R"(/env; HOME=/nonexistent )", TrainyardBin(), " submit ", out,
                                                 "/inner.yaml --server ", c.address(), " > ", out,
                                                 R"(/submit.out 2>&1; true']
)"));
  std::string alice = c.UserToken("alice");
  ASSERT_FALSE(alice.empty());
  CommandResult submitted = c.CliAs(alice, {"submit", c.dir() + "/outer.yaml", "--wait"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;

  std::string env = ReadFile(out + "/env");
  ASSERT_THAT(env, HasSubstr("TRAINYARD_JOB=outer")) << env;
  EXPECT_THAT(env, Not(HasSubstr(AdminToken())));
  EXPECT_THAT(env, Not(HasSubstr("TRAINYARD_TOKEN="))) << env;
  EXPECT_THAT(env, Not(HasSubstr("TRAINYARD_CONFIG="))) << env;
  // What the task needs to talk to its server (verify it) is still there.
  // (the task's own readable copy of the cluster CA, not the agent's file)
  size_t ca_at = env.find("TRAINYARD_CA_FILE=");
  ASSERT_NE(ca_at, std::string::npos) << env;
  ca_at += std::string("TRAINYARD_CA_FILE=").size();
  std::string ca_file = env.substr(ca_at, env.find('\n', ca_at) - ca_at);
  EXPECT_NE(ca_file, ClusterCaFile());
  EXPECT_EQ(ReadFile(ca_file), ClusterCaPem());
  EXPECT_THAT(ReadFile(out + "/submit.out"), HasSubstr("requires a token"));
  CommandResult inner = c.Cli({"describe", "inner", "-o", "json"});
  EXPECT_NE(inner.exit_code, 0) << "a job made from inside alice's task: " << inner.out;
}

// A role that asks for it (userCredential: true) gets a credential of the
// job's user: the CLI in the task reaches the server and acts as that user
// (a job it submits is hers; an admin's verb is refused), and the credential
// ends with the job.
TEST(TaskCredentialsTest, ARoleThatAsksGetsItsJobsUsersCredentialAndItEndsWithTheJob) {
  Cluster c({.nodes = 1});
  std::string out = c.dir() + "/out";
  std::filesystem::create_directories(out);
  WriteFile(out + "/inner.yaml", "name: inner\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                                 "    command: [sh, -c, 'exit 0']\n");
  std::string bin = TrainyardBin();
  WriteFile(c.dir() + "/outer.yaml", absl::StrCat(R"(name: outer
replicas:
  worker:
    userCredential: true
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'printf %s "$TRAINYARD_TOKEN" > )", out, "/token; export HOME=/nonexistent; ", bin,
                                                 " submit ", out, "/inner.yaml > ", out, "/submit.out 2>&1; ", bin,
                                                 " cordon node-0 > ", out, R"(/cordon.out 2>&1; true']
  ps:
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'env > )", out, R"(/ps-env']
)"));
  std::string alice = c.UserToken("alice");
  ASSERT_FALSE(alice.empty());
  CommandResult submitted = c.CliAs(alice, {"submit", c.dir() + "/outer.yaml", "--wait"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;

  ASSERT_TRUE(c.WaitForState("inner", "SUCCEEDED", absl::Seconds(60))) << ReadFile(out + "/submit.out");
  EXPECT_EQ(c.Describe("inner").value("user", ""), "alice");
  EXPECT_THAT(ReadFile(out + "/cordon.out"), HasSubstr("admin")) << "the credential is never an admin's";
  EXPECT_EQ(c.Describe("outer").value("state", ""), "SUCCEEDED");
  // A role that did not ask has none.
  EXPECT_THAT(ReadFile(out + "/ps-env"), Not(HasSubstr("TRAINYARD_TOKEN=")));
  // Its job ended: the credential is refused, saying why.
  std::string token = ReadFile(out + "/token");
  ASSERT_EQ(token.rfind("tyu_", 0), 0u) << token;
  CommandResult after = c.CliAs(token, {"jobs"});
  EXPECT_NE(after.exit_code, 0);
  EXPECT_THAT(after.out + after.err, HasSubstr("ended with the job")) << after.out << after.err;
}

}  // namespace
}  // namespace trainyard::testing
