// Local login, as another account of the server's host would use it: uid
// 65534 (through setpriv) runs `trainyard login --socket ...`, gets a token
// for its own account (nobody) and nothing more: its jobs are nobody's, it
// cannot touch the admin's, and a token it makes up is refused.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

using ::testing::HasSubstr;

class LoginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs root and setpriv";
    // A place the other account can reach: the binary and the socket.
    ASSERT_EQ(chmod(pub_.path().c_str(), 0755), 0);
    bin_ = pub_.path() + "/trainyard";
    std::filesystem::copy_file(TrainyardBin(), bin_);
    ASSERT_EQ(chmod(bin_.c_str(), 0755), 0);
    ASSERT_EQ(chown(home_.path().c_str(), kNobody, kNobody), 0);
    socket_ = pub_.path() + "/login.sock";
  }

  // `trainyard ARGS` as uid 65534 with its own HOME.
  CommandResult AsNobody(std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid", absl::StrCat(kNobody), "--regid",
                                     absl::StrCat(kNobody), "--clear-groups", bin_};
    argv.insert(argv.end(), args.begin(), args.end());
    // Nothing of the test's own credentials: the login gives what it needs.
    env.insert(env.begin(), {"HOME=" + home_.path(), "TRAINYARD_TOKEN", "TRAINYARD_CONFIG", "TRAINYARD_CA_FILE"});
    return RunCommandLine(argv, absl::Seconds(30), env);
  }

  TempDir pub_;
  TempDir home_;
  std::string bin_;
  std::string socket_;
};

TEST_F(LoginTest, AnotherAccountLogsInAsItselfAndGetsNoMore) {
  Cluster c({.nodes = 1, .server_flags = {"--login-socket", socket_}});
  WriteFile(c.dir() + "/admins.yaml", "name: admins\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                                       "    command: [sh, -c, 'exec sleep 600']\n");
  ASSERT_EQ(c.Cli({"submit", c.dir() + "/admins.yaml"}).exit_code, 0);

  CommandResult login = AsNobody({"login", "--socket", socket_});
  ASSERT_EQ(login.exit_code, 0) << login.err;
  std::string config = home_.path() + "/.config/trainyard/client.yaml";
  EXPECT_THAT(login.out, HasSubstr("logged in as nobody on " + c.address() + "; client config written to " + config));
  struct stat st {};
  ASSERT_EQ(stat(config.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(kNobody));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Its own job is nobody's; the admin's job is not its to kill.
  WriteFile(home_.path() + "/mine.yaml", "name: mine\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                                         "    command: [sh, -c, 'exec sleep 600']\n");
  ASSERT_EQ(chown((home_.path() + "/mine.yaml").c_str(), kNobody, kNobody), 0);
  CommandResult submit = AsNobody({"submit", home_.path() + "/mine.yaml"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  EXPECT_EQ(c.Describe("mine").value("user", ""), "nobody");
  CommandResult kill = AsNobody({"kill", "admins"});
  EXPECT_NE(kill.exit_code, 0);
  EXPECT_THAT(kill.err, HasSubstr("admins"));
  EXPECT_NE(c.JobState("admins"), "KILLED");

  // A login token it makes up for someone else is refused.
  std::string forged = "tyl_a_root_" + std::string(64, '0');
  CommandResult jobs = AsNobody({"jobs", "--server", c.address()}, {"TRAINYARD_TOKEN=" + forged});
  EXPECT_EQ(jobs.exit_code, 1) << jobs.out;
  EXPECT_THAT(jobs.err, HasSubstr("the login token is not valid here"));
}

TEST_F(LoginTest, WithoutAServerTheLoginSaysWhatItCouldNotReach) {
  CommandResult login = AsNobody({"login", "--socket", socket_});
  EXPECT_EQ(login.exit_code, 3);
  EXPECT_THAT(login.err, HasSubstr("cannot reach the login socket " + socket_));
}

}  // namespace
}  // namespace trainyard::testing
