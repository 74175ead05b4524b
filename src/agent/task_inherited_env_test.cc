// What a task takes from its agent's environment: the operator's settings,
// never the agent's credentials or client config.
#include "agent/task_inherited_env.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

const std::vector<std::string> kAgentEnv = {
    "PATH=/usr/bin", "LD_LIBRARY_PATH=/usr/local/cuda/lib64", "HOME=/root", "USER=root", "LOGNAME=root",
    "TRAINYARD_CONFIG=/srv/.trainyard/client.yaml", "TRAINYARD_TOKEN=ty_admins", "TRAINYARD_CA_FILE=/srv/ca.crt",
    "TRAINYARD_SERVER=10.0.0.1:7450", "TRAINYARD_EXAMPLES_BIN=/opt/ty/examples", "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",
    "KRB5CCNAME=FILE:/tmp/krb5cc_0", "LANG=C.UTF-8", "NOEQUALS"};

TEST(TaskInheritedEnvTest, TheAgentsCredentialsAndConfigNeverReachATask) {
  EXPECT_THAT(TaskInheritedEnvironment(kAgentEnv, nullptr),
              ElementsAre("PATH=/usr/bin", "LD_LIBRARY_PATH=/usr/local/cuda/lib64", "HOME=/root", "USER=root",
                          "LOGNAME=root", "TRAINYARD_EXAMPLES_BIN=/opt/ty/examples", "LANG=C.UTF-8", "NOEQUALS"));
}

TEST(TaskInheritedEnvTest, ATaskOfAnotherAccountHasThatAccountsHomeAndName) {
  TaskAccount nobody{.name = "nobody", .uid = 65534, .gid = 65534, .home = "/nonexistent"};
  EXPECT_THAT(TaskInheritedEnvironment(kAgentEnv, &nobody),
              UnorderedElementsAre("PATH=/usr/bin", "LD_LIBRARY_PATH=/usr/local/cuda/lib64",
                                   "TRAINYARD_EXAMPLES_BIN=/opt/ty/examples", "LANG=C.UTF-8", "NOEQUALS",
                                   "HOME=/nonexistent", "USER=nobody", "LOGNAME=nobody"));
  TaskAccount bare{.uid = 4242, .gid = 4242};
  std::vector<std::string> env = TaskInheritedEnvironment(kAgentEnv, &bare);
  for (const std::string& e : env) {
    EXPECT_FALSE(e.rfind("HOME=", 0) == 0 || e.rfind("USER=", 0) == 0) << e;
  }
}

TEST(TaskInheritedEnvTest, EveryTrainyardVariableButTheExamplesPathsIsWithheld) {
  for (const char* name : {"TRAINYARD_TOKEN", "TRAINYARD_CONFIG", "TRAINYARD_CA_FILE", "TRAINYARD_JOB_TOKEN",
                           "TRAINYARD_SOMETHING_NEW", "SSH_AUTH_SOCK", "XDG_RUNTIME_DIR"}) {
    EXPECT_TRUE(WithheldFromTasks(name)) << name;
  }
  for (const char* name : {"TRAINYARD_EXAMPLES_BIN", "TRAINYARD_EXAMPLES_DIR", "PATH", "CUDA_HOME", "TRAINYARD"}) {
    EXPECT_FALSE(WithheldFromTasks(name)) << name;
  }
}

}  // namespace
}  // namespace trainyard::agent
