// The task keeper: its request's encoding, the keeper program the agent
// starts tasks under (and the fork it falls back to), and which program the
// agent trusts. Every test of this binary starts its tasks under the keeper
// program built beside it, as an agent beside its `trainyard` does
// (KeeperProgramEnvironment); the fork is tested here by name.
#include "agent/keeper.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "agent/process_spawn.h"
#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::TempDir;
using testing::Unstamped;

class KeeperProgramEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { SetKeeperProgramForTest(TRAINYARD_KEEPER_PROGRAM); }
};
[[maybe_unused]] ::testing::Environment* const kKeeperProgram =
    ::testing::AddGlobalTestEnvironment(new KeeperProgramEnvironment);

KeeperRequest SampleRequest() {
  return {.argv = {"sh", "-c", "echo hi"},
          .env = {"PATH=/usr/bin:/bin", "A=b c"},
          .working_dir = "/tmp",
          .log_dir = "/var/logs",
          .stdout_name = "attempt-0.stdout",
          .stderr_name = "attempt-0.stderr",
          .log_max_bytes = 1 << 20,
          .procs_files = {"/sys/fs/cgroup/x/cgroup.procs"},
          .switch_account = true,
          .uid = 65534,
          .gid = 65534,
          .groups = {65534, 100},
          .exit_status_path = "/var/logs/attempt-0.status",
          .umask = 022};
}

TEST(KeeperRequestTest, RoundTripsAndRefusesAnythingButAWholeRequest) {
  KeeperRequest in = SampleRequest();
  std::string bytes = EncodeKeeperRequest(in);
  KeeperRequest out;
  ASSERT_TRUE(DecodeKeeperRequest(bytes, &out));
  EXPECT_EQ(out.argv, in.argv);
  EXPECT_EQ(out.env, in.env);
  EXPECT_EQ(out.working_dir, in.working_dir);
  EXPECT_EQ(out.log_dir, in.log_dir);
  EXPECT_EQ(out.stdout_name, in.stdout_name);
  EXPECT_EQ(out.stderr_name, in.stderr_name);
  EXPECT_EQ(out.log_max_bytes, in.log_max_bytes);
  EXPECT_EQ(out.procs_files, in.procs_files);
  EXPECT_TRUE(out.switch_account);
  EXPECT_EQ(out.uid, 65534u);
  EXPECT_EQ(out.gid, 65534u);
  EXPECT_EQ(out.groups, in.groups);
  EXPECT_EQ(out.exit_status_path, in.exit_status_path);
  EXPECT_EQ(out.umask, 022);

  KeeperRequest other_format;
  EXPECT_FALSE(DecodeKeeperRequest("trainyard-keeper-request-0" + bytes.substr(26), &other_format));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    KeeperRequest partial;
    EXPECT_FALSE(DecodeKeeperRequest(std::string_view(bytes).substr(0, cut), &partial)) << cut;
  }
  KeeperRequest longer;
  EXPECT_FALSE(DecodeKeeperRequest(bytes + "x", &longer));
  KeeperRequest no_command = SampleRequest();
  no_command.argv.clear();
  EXPECT_FALSE(DecodeKeeperRequest(EncodeKeeperRequest(no_command), &longer));
  KeeperRequest agent_umask = SampleRequest();
  agent_umask.umask = -1;
  ASSERT_TRUE(DecodeKeeperRequest(EncodeKeeperRequest(agent_umask), &out));
  EXPECT_EQ(out.umask, -1);
}

class KeeperSpawnTest : public ::testing::Test {
 protected:
  void TearDown() override { SetKeeperProgramForTest(TRAINYARD_KEEPER_PROGRAM); }

  SpawnRequest Request(const std::string& script) {
    std::filesystem::create_directories(dir_.path() + "/logs");
    return {.argv = {"sh", "-c", script},
            .env = {"PATH=/usr/bin:/bin", "GREETING=hello"},
            .working_dir = dir_.path(),
            .stdout_path = dir_.path() + "/logs/attempt-0.stdout",
            .stderr_path = dir_.path() + "/logs/attempt-0.stderr",
            .exit_status_path = dir_.path() + "/logs/attempt-0.status"};
  }
  static int Wait(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }
  // The task's keeper runs as `program` (its /proc/PID/exe), its task
  // writes both logs and ends with 3, which the keeper records and ends with.
  void ExpectATaskRunsUnder(const std::string& program) {
    SpawnRequest r = Request("echo \"$GREETING from $(pwd)\"; echo to-err >&2; read line < stop; exit 3");
    ASSERT_EQ(mkfifo((dir_.path() + "/stop").c_str(), 0600), 0);
    absl::StatusOr<pid_t> pid = SpawnTaskProcess(r);
    ASSERT_TRUE(pid.ok()) << pid.status();
    std::error_code ec;
    EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(*pid) + "/exe", ec).string(), program);
    std::ofstream(dir_.path() + "/stop") << "go\n";
    int status = Wait(*pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 3);
    EXPECT_EQ(Unstamped(ReadFileOrEmpty(r.stdout_path)), "hello from " + dir_.path() + "\n");
    EXPECT_EQ(Unstamped(ReadFileOrEmpty(r.stderr_path)), "to-err\n");
    EXPECT_EQ(ReadWaitStatus(r.exit_status_path), status);
  }

  TempDir dir_;
};

TEST_F(KeeperSpawnTest, ATaskStartsUnderTheKeeperProgramWhichLogsAndRecordsItsEnd) {
  ExpectATaskRunsUnder(std::filesystem::canonical(TRAINYARD_KEEPER_PROGRAM).string());
}

TEST_F(KeeperSpawnTest, WithoutAKeeperProgramTheAgentForksItselfAsTheKeeper) {
  SetKeeperProgramForTest("");
  ExpectATaskRunsUnder(std::filesystem::read_symlink("/proc/self/exe").string());
}

TEST_F(KeeperSpawnTest, TheKeeperProgramSaysWhyATaskCouldNotStart) {
  SpawnRequest missing = Request("true");
  missing.argv = {"no-such-command-here"};
  absl::StatusOr<pid_t> pid = SpawnTaskProcess(missing);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("cannot run the command no-such-command-here"));

  SpawnRequest no_dir = Request("true");
  no_dir.working_dir = dir_.path() + "/gone";
  pid = SpawnTaskProcess(no_dir);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("cannot enter the working directory " + dir_.path() + "/gone"));

  SpawnRequest no_logs = Request("true");
  no_logs.stdout_path = dir_.path() + "/nowhere/attempt-0.stdout";
  no_logs.stderr_path = dir_.path() + "/nowhere/attempt-0.stderr";
  pid = SpawnTaskProcess(no_logs);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("cannot open the stdout log"));

  SetKeeperProgramForTest(dir_.path() + "/no-keeper");
  pid = SpawnTaskProcess(Request("true"));
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("cannot run the task keeper " + dir_.path() + "/no-keeper"));
}

TEST_F(KeeperSpawnTest, TheKeeperProgramRefusesARequestItCannotRead) {
  int memfd = memfd_create("request", 0);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(write(memfd, "garbage", 7), 7);
  int fail[2];
  ASSERT_EQ(pipe2(fail, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(memfd, 3);
    dup2(fail[1], 4);
    execl(TRAINYARD_KEEPER_PROGRAM, "trainyard-keeper", nullptr);
    _exit(126);
  }
  close(fail[1]);
  int report[2] = {0, 0};
  EXPECT_EQ(read(fail[0], report, sizeof(report)), static_cast<ssize_t>(sizeof(report)));
  close(fail[0]);
  close(memfd);
  int status = Wait(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127) << status;
  EXPECT_EQ(report[0], kStepKeeperRequest);
  EXPECT_EQ(report[1], EINVAL);
}

TEST(TrustedKeeperProgramTest, OnlyAProgramNoOneElseMayReplaceIsTrusted) {
  TempDir dir;
  std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  chmod(bin.c_str(), 0755);
  EXPECT_EQ(TrustedKeeperProgram(bin), "") << "no program there";
  std::string program = bin + "/trainyard-keeper";
  std::filesystem::copy_file(TRAINYARD_KEEPER_PROGRAM, program);
  chmod(program.c_str(), 0755);
  EXPECT_EQ(TrustedKeeperProgram(bin), program);
  chmod(program.c_str(), 0775);
  EXPECT_EQ(TrustedKeeperProgram(bin), "") << "group-writable program";
  chmod(program.c_str(), 0644);
  EXPECT_EQ(TrustedKeeperProgram(bin), "") << "not executable";
  chmod(program.c_str(), 0755);
  chmod(bin.c_str(), 0777);
  EXPECT_EQ(TrustedKeeperProgram(bin), "") << "a directory anyone may write";
  chmod(bin.c_str(), 0755);
  chmod(dir.path().c_str(), 0777);
  EXPECT_EQ(TrustedKeeperProgram(bin), "") << "a directory above it anyone may write";
  chmod(dir.path().c_str(), 0700);
  EXPECT_EQ(TrustedKeeperProgram(bin), program);
  std::string elsewhere = dir.path() + "/elsewhere";
  std::filesystem::create_directories(elsewhere);
  std::filesystem::rename(program, elsewhere + "/trainyard-keeper");
  std::filesystem::create_symlink(elsewhere + "/trainyard-keeper", program);
  EXPECT_EQ(TrustedKeeperProgram(bin), "") << "a link (its target's directory is not the one checked)";
  std::filesystem::remove(program);
  std::filesystem::rename(elsewhere + "/trainyard-keeper", program);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(program.c_str(), 65534, 65534), 0);
    EXPECT_EQ(TrustedKeeperProgram(bin), "") << "another account's program";
  }
}

}  // namespace
}  // namespace trainyard::agent
