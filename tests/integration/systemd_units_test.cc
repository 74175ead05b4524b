// The systemd units in deploy/systemd: systemd's own checker finds nothing
// to say of them, and the commands they run start a server and an agent
// that registers with it (the unit's paths moved into a temporary directory,
// the binary the one under test).
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "security/tokens.h"
#include "tests/integration/harness.h"

namespace trainyard::testing {
namespace {

std::string UnitPath(const std::string& name) {
  return absl::StrCat(TRAINYARD_SOURCE_DIR, "/deploy/systemd/", name);
}

// The unit's ExecStart= command line, split on spaces (the units quote nothing).
std::vector<std::string> ExecStart(const std::string& unit) {
  for (absl::string_view line : absl::StrSplit(unit, '\n')) {
    if (absl::ConsumePrefix(&line, "ExecStart=")) return absl::StrSplit(line, ' ', absl::SkipEmpty());
  }
  return {};
}

class SystemdUnitsTest : public ::testing::Test {
 protected:
  // The unit with the binary under test in place of /usr/local/bin/trainyard
  // and `replace`d paths, written to the temporary directory.
  std::string Installed(const std::string& name, const std::vector<std::pair<std::string, std::string>>& replace) {
    std::vector<std::pair<std::string, std::string>> all = {{"/usr/local/bin/trainyard", TrainyardBin()}};
    all.insert(all.end(), replace.begin(), replace.end());
    std::string text = absl::StrReplaceAll(ReadFile(UnitPath(name)), all);
    WriteFile(absl::StrCat(dir_.path(), "/", name), text);
    return text;
  }
  TempDir dir_;
};

TEST_F(SystemdUnitsTest, SystemdAnalyzeVerifyFindsNothingToSay) {
  if (!std::filesystem::exists("/usr/bin/systemd-analyze")) GTEST_SKIP() << "systemd-analyze is not installed";
  for (const std::string name : {"trainyard-server.service", "trainyard-agent.service"}) {
    ASSERT_FALSE(ReadFile(UnitPath(name)).empty()) << UnitPath(name);
    Installed(name, {});
    CommandResult r =
        RunCommandLine({"/usr/bin/systemd-analyze", "verify", absl::StrCat(dir_.path(), "/", name)}, absl::Seconds(60));
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.out << r.err;
    // A directive it cannot parse is a warning, not a failure: none is allowed.
    EXPECT_EQ(r.out + r.err, "") << name;
  }
}

TEST_F(SystemdUnitsTest, TheUnitsCommandsStartAServerAndAnAgentThatRegisters) {
  std::string etc = dir_.path() + "/etc", state = dir_.path() + "/state", agent_state = dir_.path() + "/agent";
  std::filesystem::create_directories(etc);
  int port = FreePortPair();
  std::string address = absl::StrCat("127.0.0.1:", port);
  WriteFile(etc + "/server.yaml", absl::StrCat("listen: ", address, "\nloginSocket: \"off\"\n"));
  ASSERT_TRUE(security::AddToken(security::TokenFilePath(state), AdminToken(), "admin", true).ok());
  std::vector<std::string> server =
      ExecStart(Installed("trainyard-server.service", {{"/etc/trainyard", etc}, {"/var/lib/trainyard", state}}));
  ASSERT_GE(server.size(), 2u);
  Process s(server, dir_.path() + "/server.log");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(s.log()).find("listening on") != std::string::npos; },
                        absl::Seconds(30)))
      << ReadFile(s.log());

  // The agent's environment file, as the unit's comment shows it.
  std::string users = dir_.path() + "/users";
  WriteFile(users, absl::StrCat("\"*\": ", getuid(), "\n"));
  std::string flags = absl::StrCat("--name unit-node --simulate-gpus 1 --memory-mb 1024 --vcores 2 --address 127.0.0.1 "
                                   "--kill-tasks-on-exit --task-user-map ",
                                   users, getuid() == 0 ? " --allow-root-tasks" : "");
  std::vector<std::string> agent = ExecStart(Installed("trainyard-agent.service", {{"/var/lib/trainyard-agent", agent_state},
                                                                                  {"${TRAINYARD_SERVERS}", address}}));
  std::vector<std::string> argv;
  for (const std::string& arg : agent) {
    if (arg != "$TRAINYARD_AGENT_FLAGS") {
      argv.push_back(arg);
      continue;
    }
    for (absl::string_view f : absl::StrSplit(flags, ' ', absl::SkipEmpty())) argv.emplace_back(f);
  }
  Process a(argv, dir_.path() + "/agent.log");
  CommandResult nodes;
  EXPECT_TRUE(WaitUntil([&] {
    nodes = RunCli({"nodes", "--server", address}, absl::Seconds(30), {"TRAINYARD_CA_FILE"});
    return nodes.out.find("unit-node") != std::string::npos && nodes.out.find("READY") != std::string::npos;
  }, absl::Seconds(60)))
      << nodes.out << nodes.err << ReadFile(a.log());
  a.Stop();
  s.Stop();
}

}  // namespace
}  // namespace trainyard::testing
