// Turning launch orders into what the supervisor runs: files in the task
// directory, ${TRAINYARD_TASK_DIR} in env, and clear errors for what cannot be.
#include "agent/server_link.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;

class ServerLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ty-link-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

v1::TaskSpec ServerLinkSpec() {
  v1::TaskSpec s;
  s.set_job("j");
  s.set_role("worker");
  s.set_index(1);
  s.add_command("true");
  return s;
}

TEST_F(ServerLinkTest, WritesFilesAndReplacesTheTaskDirInEnv) {
  v1::TaskSpec s = ServerLinkSpec();
  (*s.mutable_files())["hosts"] = "127.0.0.1 j-worker-1\n";
  (*s.mutable_env())["TRAINYARD_HOSTS_FILE"] = "${TRAINYARD_TASK_DIR}/hosts";
  (*s.mutable_env())["TRAINYARD_USER"] = "alice";
  s.mutable_allocation()->set_gpu_mask(0x6);
  auto launch = ToTaskLaunch(s, dir_);
  ASSERT_TRUE(launch.ok()) << launch.status();
  std::string task_dir = absl::StrCat(dir_, "/work/j/worker-1");
  EXPECT_EQ(launch->env.at("TRAINYARD_HOSTS_FILE"), absl::StrCat(task_dir, "/hosts"));
  EXPECT_EQ(launch->working_dir, task_dir);
  EXPECT_EQ(launch->user, "alice");  // whose account the task runs as
  EXPECT_EQ(launch->gpus.bits(), 0x6u);
  std::ifstream in(absl::StrCat(task_dir, "/hosts"));
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "127.0.0.1 j-worker-1\n");
}

// An MPI task's rsh agent is this agent's own binary.
TEST_F(ServerLinkTest, TheTrainyardBinaryIsTheAgentsOwn) {
  v1::TaskSpec s = ServerLinkSpec();
  (*s.mutable_env())["OMPI_MCA_plm_rsh_agent"] = "${TRAINYARD_BIN} rsh";
  auto launch = ToTaskLaunch(s, dir_);
  ASSERT_TRUE(launch.ok()) << launch.status();
  std::string agent = launch->env.at("OMPI_MCA_plm_rsh_agent");
  EXPECT_EQ(agent, std::filesystem::read_symlink("/proc/self/exe").string() + " rsh");
}

// A task owns its directory and may leave links under the names the agent
// writes: the agent (root) replaces them, never writes through them.
TEST_F(ServerLinkTest, AFileIsNeverWrittenThroughALinkATaskLeft) {
  std::string task_dir = absl::StrCat(dir_, "/work/j/worker-1");
  std::string victim = absl::StrCat(dir_, "/victim");
  std::filesystem::create_directories(task_dir);
  std::ofstream(victim) << "untouched\n";
  std::filesystem::create_symlink(victim, task_dir + "/hosts.tmp");
  std::filesystem::create_symlink(victim, task_dir + "/jobmaster");
  google::protobuf::Map<std::string, std::string> files;
  files["hosts"] = "127.0.0.1 j-worker-1\n";
  files["jobmaster"] = "127.0.0.1:7000\n";
  ASSERT_TRUE(WriteTaskFiles(task_dir, files).ok());
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_EQ(read(victim), "untouched\n");
  EXPECT_EQ(read(task_dir + "/hosts"), "127.0.0.1 j-worker-1\n");
  EXPECT_FALSE(std::filesystem::is_symlink(task_dir + "/jobmaster")) << "the link is replaced";
  EXPECT_EQ(read(task_dir + "/jobmaster"), "127.0.0.1:7000\n");
}

TEST_F(ServerLinkTest, CheckpointDirThatCannotBeWrittenIsAClearError) {
  std::ofstream(absl::StrCat(dir_, "/a-file")) << "x";
  v1::TaskSpec s = ServerLinkSpec();
  (*s.mutable_env())["TRAINYARD_CHECKPOINT_DIR"] = absl::StrCat(dir_, "/a-file/ckpt");
  auto launch = ToTaskLaunch(s, dir_);
  ASSERT_FALSE(launch.ok());
  EXPECT_THAT(launch.status().message(), HasSubstr(absl::StrCat("checkpoint dir ", dir_, "/a-file/ckpt cannot be written")));
}

// A launch order's job and role become paths under the data dir: a name
// that climbs out of it ("../x") is refused before anything is written,
// as the task's fault (InvalidArgument), and nothing appears outside.
TEST_F(ServerLinkTest, AnOrderWhoseNamesLeaveTheDataDirIsRefused) {
  std::string data = absl::StrCat(dir_, "/data");
  struct Bad {
    std::string job, role, field;
  };
  for (const Bad& bad : std::vector<Bad>{{"../../outside", "worker", "job \""},
                                         {"j", "../../../outside", "role \""},
                                         {"..", "worker", "job \""},
                                         {"j", "", "role \""},
                                         {"a/b", "w", "job \""}}) {
    const std::string& job = bad.job;
    const std::string& role = bad.role;
    v1::TaskSpec s = ServerLinkSpec();
    s.set_job(job);
    s.set_role(role);
    (*s.mutable_files())["hosts"] = "x\n";
    auto launch = ToTaskLaunch(s, data);
    ASSERT_FALSE(launch.ok()) << job << " / " << role;
    EXPECT_EQ(launch.status().code(), absl::StatusCode::kInvalidArgument) << launch.status();
    EXPECT_THAT(launch.status().message(), HasSubstr(bad.field));
  }
  EXPECT_FALSE(std::filesystem::exists(absl::StrCat(dir_, "/outside")));
  v1::TaskSpec negative = ServerLinkSpec();
  negative.set_index(-1);
  EXPECT_THAT(ToTaskLaunch(negative, data).status().message(), HasSubstr("index must be >= 0"));
  v1::TaskSpec env = ServerLinkSpec();
  (*env.mutable_env())["A=B"] = "c";
  EXPECT_THAT(ToTaskLaunch(env, data).status().message(), HasSubstr("env: 'A=B' is not a variable name"));
}

}  // namespace
}  // namespace trainyard::agent
