// `trainyard up` run by root, as another account of the host would use it:
// uid 65534 (through setpriv) logs in at the login socket the banner names
// and submits a job; the job runs as that account, not as root, holds no
// credential of the admin's, and a `trainyard submit` inside it cannot act
// as the admin. up's daemons hold no client config of the admin's either.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The environment of each process whose command line holds `needle`, as
// "NAME=VALUE" lines.
std::vector<std::string> EnvironmentsOf(const std::string& needle) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string cmdline = ReadFile(e.path().string() + "/cmdline");
    if (cmdline.find(needle) == std::string::npos) continue;
    std::string env = ReadFile(e.path().string() + "/environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    found.push_back(env);
  }
  return found;
}

class UpAsRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs root and setpriv";
    ASSERT_EQ(chmod(pub_.path().c_str(), 0755), 0);
    bin_ = pub_.path() + "/trainyard";
    std::filesystem::copy_file(TrainyardBin(), bin_);
    ASSERT_EQ(chmod(bin_.c_str(), 0755), 0);
    ASSERT_EQ(chown(home_.path().c_str(), kNobody, kNobody), 0);
  }

  // `trainyard ARGS` as uid 65534 with its own HOME and none of the test's
  // credentials.
  CommandResult AsNobody(std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid", absl::StrCat(kNobody), "--regid",
                                     absl::StrCat(kNobody), "--clear-groups", bin_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommandLine(argv, absl::Seconds(60),
                          {"HOME=" + home_.path(), "TRAINYARD_TOKEN", "TRAINYARD_CONFIG", "TRAINYARD_CA_FILE"});
  }
  // A file of nobody's in its home.
  std::string NobodysFile(const std::string& name, const std::string& content) {
    std::string path = home_.path() + "/" + name;
    WriteFile(path, content);
    EXPECT_EQ(chown(path.c_str(), kNobody, kNobody), 0);
    return path;
  }

  TempDir pub_;
  TempDir home_;
  std::string bin_;
};

TEST_F(UpAsRootTest, AnotherAccountsJobRunsAsItselfWithNoCredentialOfTheAdmin) {
  int port = FreePortPair();
  std::string address = absl::StrCat("127.0.0.1:", port);
  std::string root = pub_.path() + "/cluster";
  Process up({TrainyardBin(), "up", "--nodes", "1", "--gpus-per-node", "2", "--port", std::to_string(port),
              "--data-dir", root},
             pub_.path() + "/up.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(up.log()).find("Press Ctrl-C") != std::string::npos || !up.Running(); },
                      absl::Seconds(60), absl::Milliseconds(50)))
      << ReadFile(up.log());
  ASSERT_TRUE(up.Running()) << ReadFile(up.log());
  std::string socket = root + "/server/login.sock";
  ASSERT_THAT(ReadFile(up.log()), HasSubstr("login --socket " + socket));

  // up's daemons hold no client credential of the admin's.
  std::vector<std::string> daemons = EnvironmentsOf(root + "/node-0");
  ASSERT_FALSE(daemons.empty());
  for (const std::string& env : daemons) {
    EXPECT_THAT(env, Not(HasSubstr("TRAINYARD_CONFIG="))) << env;
    EXPECT_THAT(env, Not(HasSubstr("TRAINYARD_TOKEN="))) << env;
  }

  CommandResult login = AsNobody({"login", "--socket", socket});
  ASSERT_EQ(login.exit_code, 0) << login.err;
  std::string inner = NobodysFile("inner.yaml", "name: inner\nreplicas:\n  worker:\n    resources: {cpu: 100m, "
                                                "memory: 64Mi}\n    command: [sh, -c, 'exit 0']\n");
  std::string spec = NobodysFile("whoami.yaml", absl::StrCat(R"y(name: whoami
replicas:
  worker:
    resources: {cpu: 100m, memory: 64Mi}
    command: [sh, -c, 'echo "uid=$(id -u)"; head -1 /etc/shadow; env | grep ^TRAINYARD_ | sort; )y", bin_,
                                                             " submit ", inner, " --server ", address, R"(; true']
)"));
  CommandResult submit = AsNobody({"submit", spec, "--wait"});
  EXPECT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  CommandResult logs = AsNobody({"logs", "whoami"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr(absl::StrCat("uid=", kNobody))) << logs.out;
  EXPECT_THAT(logs.out, Not(HasSubstr("root:"))) << "the task read /etc/shadow:\n" << logs.out;
  EXPECT_THAT(logs.out, Not(HasSubstr("TRAINYARD_CONFIG="))) << logs.out;
  EXPECT_THAT(logs.out, Not(HasSubstr("TRAINYARD_TOKEN="))) << logs.out;
  // The submit inside the task had no one's credential but its own account's (none).
  const std::vector<std::string> as_admin = UpClientEnv(root);
  CommandResult made = RunCli({"describe", "inner", "-o", "json", "--server", address}, absl::Seconds(30), as_admin);
  EXPECT_NE(made.exit_code, 0) << "a job made from inside nobody's task: " << made.out;
  CommandResult mine = RunCli({"describe", "whoami", "-o", "json", "--server", address}, absl::Seconds(30), as_admin);
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(nlohmann::json::parse(mine.out).value("user", ""), "nobody") << mine.out;
  up.Stop();
}

}  // namespace
}  // namespace trainyard::testing
