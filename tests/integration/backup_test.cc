// `trainyard admin backup` and `restore`: a running cluster's SQLite store
// backed up while its server runs, restored into etcd (a move to the highly
// available store), a server started there serves the jobs as they were;
// etcd backed up while that server leads and restored into a new SQLite data
// dir that `server --check-store` finds consistent. A restore into a store
// that holds anything is refused.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "security/tokens.h"
#include "tests/etcd/etcd_test_cluster.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

TEST(BackupTest, ABackupTakenWhileTheServerRunsRestoresIntoEtcdAndBackIntoSqlite) {
  store_test::EtcdTestCluster etcd(1);
  ASSERT_TRUE(etcd.status().ok()) << etcd.status();
  Cluster c({.nodes = 1});
  std::string sleeper = c.Submit(R"(name: long
jobmaster: false
replicas:
  worker:
    count: 2
    resources: {cpu: 100m, memory: 32Mi}
    command: [sleep, "600"]
)");
  std::string done = c.Submit(R"(name: short
jobmaster: false
replicas:
  worker:
    count: 1
    resources: {cpu: 100m, memory: 32Mi}
    command: ["true"]
)");
  ASSERT_TRUE(c.WaitForState(sleeper, "RUNNING")) << c.Describe(sleeper).dump(1);
  ASSERT_TRUE(c.WaitForState(done, "SUCCEEDED")) << c.Describe(done).dump(1);

  std::string file = c.dir() + "/backup";
  CommandResult backup = RunCli({"admin", "backup", file, "--data-dir", c.server_data_dir()});
  ASSERT_EQ(backup.exit_code, 0) << backup.err;
  EXPECT_THAT(backup.out, HasSubstr("backed up 2 jobs (3 tasks)"));
  EXPECT_THAT(backup.out, HasSubstr("1 node,"));

  CommandResult restore = RunCli({"admin", "restore", file, "--store", etcd.address()});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_THAT(restore.out, HasSubstr("restored 2 jobs (3 tasks)"));
  CommandResult again = RunCli({"admin", "restore", file, "--store", etcd.address()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("not empty"));
  CommandResult neither = RunCli({"admin", "backup", file});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_THAT(neither.err, HasSubstr("--data-dir DIR (SQLite) or --store"));

  // A server on the etcd store serves the jobs as they were.
  std::string data = c.dir() + "/etcd-server";
  ASSERT_TRUE(security::AddToken(security::TokenFilePath(data), AdminToken(), "admin", true).ok());
  int port = FreePortPair();
  std::string address = absl::StrCat("127.0.0.1:", port);
  Process server({TrainyardBin(), "server", "--listen", address, "--data-dir", data, "--store", etcd.address(),
                  "--leader-lease-ms", "1000", "--login-socket", "off"},
                 c.dir() + "/etcd-server.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(server.log()).find("listening on") != std::string::npos; },
                        absl::Seconds(30)))
      << ReadFile(server.log());
  auto described = [&](const std::string& job) {
    CommandResult r = RunCli({"describe", job, "-o", "json", "--server", address}, absl::Seconds(30), {"TRAINYARD_CA_FILE"});
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  };
  nlohmann::json short_job = described(done);
  EXPECT_EQ(short_job.value("state", ""), "SUCCEEDED") << short_job.dump(1);
  EXPECT_FALSE(short_job.value("events", nlohmann::json::array()).empty()) << short_job.dump(1);
  nlohmann::json long_job = described(sleeper);
  EXPECT_EQ(long_job.value("tasks", nlohmann::json::array()).size(), 2u) << long_job.dump(1);

  // etcd, backed up while that server leads, into a new SQLite data dir.
  std::string file2 = c.dir() + "/backup-from-etcd";
  CommandResult from_etcd = RunCli({"admin", "backup", file2, "--store", etcd.address()});
  ASSERT_EQ(from_etcd.exit_code, 0) << from_etcd.err;
  EXPECT_THAT(from_etcd.out, HasSubstr("backed up 2 jobs (3 tasks)"));
  std::string sqlite = c.dir() + "/restored";
  CommandResult into = RunCli({"admin", "restore", file2, "--data-dir", sqlite});
  ASSERT_EQ(into.exit_code, 0) << into.err;
  CommandResult check = RunCli({"server", "--check-store", "--data-dir", sqlite});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_THAT(check.out, HasSubstr("consistent"));
  server.Stop();
}

}  // namespace
}  // namespace trainyard::testing
