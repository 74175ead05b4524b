// The launch contract (launch_contract.h): which task gets which credential,
// secrets opened and never chosen over what the server set.
#include "server/launch_contract.h"

#include "absl/strings/str_cat.h"
#include "api/task_env.h"
#include "gtest/gtest.h"
#include "server/control/test_backend.h"

namespace trainyard::server {
namespace {

class LaunchContractTest : public ::testing::Test {
 protected:
  LaunchContractTest() {
    secrets_.SetJobCredentials([](uint64_t id) { return absl::StrCat("token-", id); },
                               [](uint64_t id) { return absl::StrCat("secret-", id); },
                               [](uint64_t id) { return absl::StrCat("user-", id); });
    secrets_.SetSecretOpener([](const std::string& sealed) -> absl::StatusOr<std::string> {
      if (sealed == "bad") return absl::DataLossError("not sealed with this server's key");
      return "opened:" + sealed;
    });
  }
  // What `task` (job 7) receives.
  v1::TaskSpec Launched(v1::TaskSpec task) {
    task.set_job("j");
    task.set_job_id(7);
    const size_t before = recorded_.launches.size();
    contract_.Launch("n1", std::move(task));
    if (recorded_.launches.size() != before + 1) {
      ADD_FAILURE() << "the launch was not handed on";
      return {};
    }
    return recorded_.launches.back().second;
  }
  static v1::TaskSpec Role(const std::string& role) {
    v1::TaskSpec t;
    t.set_role(role);
    return t;
  }

  testing::RecordingBackend recorded_;
  TaskSecrets secrets_;
  LaunchContract contract_{&recorded_, &secrets_};
};

TEST_F(LaunchContractTest, AWorkerWithoutAMasterGetsNoCredential) {
  v1::TaskSpec t = Launched(Role("worker"));
  EXPECT_EQ(t.env().count(kJobTokenEnv), 0u);
  EXPECT_EQ(t.env().count(kJobSecretEnv), 0u);
  EXPECT_EQ(t.env().count(kTokenEnv), 0u);
  EXPECT_EQ(recorded_.launches.back().first, "n1");
}

TEST_F(LaunchContractTest, TheMasterGetsTheJobsCredentialAndSecretItsWorkersTheSecretOnly) {
  v1::TaskSpec master = Launched(Role("jobmaster"));
  EXPECT_EQ(master.env().at(kJobTokenEnv), "token-7");
  EXPECT_EQ(master.env().at(kJobSecretEnv), "secret-7");
  v1::TaskSpec worker = Role("worker");
  (*worker.mutable_env())[kJobMasterEnv] = "${TRAINYARD_TASK_DIR}/jobmaster";
  worker = Launched(worker);
  EXPECT_EQ(worker.env().at(kJobSecretEnv), "secret-7");
  EXPECT_EQ(worker.env().count(kJobTokenEnv), 0u) << "only the master holds the job's credential";
}

TEST_F(LaunchContractTest, AnMpiRankGetsTheSecretAndARoleThatAskedGetsItsUsersCredential) {
  v1::TaskSpec rank = Role("worker");
  (*rank.mutable_env())[api::kMpiRshAgentEnv] = "${TRAINYARD_BIN} rsh";
  EXPECT_EQ(Launched(rank).env().at(kJobSecretEnv), "secret-7");
  v1::TaskSpec asked = Role("worker");
  asked.set_user_credential(true);
  EXPECT_EQ(Launched(asked).env().at(kTokenEnv), "user-7");
}

TEST_F(LaunchContractTest, SecretsAreOpenedNeverOverWhatTheServerSetAndOneThatCannotOpenIsLeftOut) {
  v1::TaskSpec t = Role("worker");
  (*t.mutable_env())[kTaskUserEnv] = "alice";
  (*t.mutable_secret_env())["WANDB_KEY"] = "k1";
  (*t.mutable_secret_env())[kTaskUserEnv] = "root";
  (*t.mutable_secret_env())["BROKEN"] = "bad";
  t.set_user_credential(true);
  (*t.mutable_secret_env())[kTokenEnv] = "forged";
  t = Launched(t);
  EXPECT_EQ(t.env().at("WANDB_KEY"), "opened:k1");
  EXPECT_EQ(t.env().at(kTaskUserEnv), "alice") << "a spec's secret must not choose who the task runs as";
  EXPECT_EQ(t.env().at(kTokenEnv), "user-7");
  EXPECT_EQ(t.env().count("BROKEN"), 0u);
  EXPECT_EQ(t.secret_env_size(), 0) << "no sealed value leaves the server";
}

TEST_F(LaunchContractTest, EveryOtherOrderPassesThrough) {
  v1::KillTask kill;
  kill.set_job("j");
  contract_.Kill("n2", kill);
  contract_.Drained("n2");
  v1::CheckpointOrder order;
  order.set_id(3);
  contract_.OrderCheckpoint("10.0.0.1:9", 7, "j", order);
  ASSERT_EQ(recorded_.kills.size(), 1u);
  EXPECT_EQ(recorded_.kills[0].first, "n2");
  EXPECT_EQ(recorded_.drained, std::vector<std::string>{"n2"});
  ASSERT_EQ(recorded_.orders.size(), 1u);
  EXPECT_EQ(recorded_.orders[0].second.id(), 3);
}

TEST(LaunchContractNoAuthTest, WithoutCredentialsOrSealingNothingIsAddedAndSecretsPassAsGiven) {
  testing::RecordingBackend recorded;
  TaskSecrets secrets;  // a server run with --no-auth and without sealing
  LaunchContract contract(&recorded, &secrets);
  v1::TaskSpec t;
  t.set_role("jobmaster");
  t.set_user_credential(true);
  (*t.mutable_secret_env())["WANDB_KEY"] = "plain";
  contract.Launch("n1", t);
  ASSERT_EQ(recorded.launches.size(), 1u);
  const v1::TaskSpec& got = recorded.launches[0].second;
  EXPECT_EQ(got.env().count(kJobTokenEnv), 0u);
  EXPECT_EQ(got.env().count(kJobSecretEnv), 0u);
  EXPECT_EQ(got.env().count(kTokenEnv), 0u);
  EXPECT_EQ(got.env().at("WANDB_KEY"), "plain");
  EXPECT_EQ(got.secret_env_size(), 0);
}

}  // namespace
}  // namespace trainyard::server
