// Turning launch orders into what the supervisor runs: files in the task
// directory, ${TRAINYARD_TASK_DIR} in env, and clear errors for what cannot be.
#include "agent/server_link.h"

#include <filesystem>
#include <fstream>
#include <sstream>

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

v1::TaskSpec Spec() {
  v1::TaskSpec s;
  s.set_job("j");
  s.set_role("worker");
  s.set_index(1);
  s.add_command("true");
  return s;
}

TEST_F(ServerLinkTest, WritesFilesAndReplacesTheTaskDirInEnv) {
  v1::TaskSpec s = Spec();
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

TEST_F(ServerLinkTest, CheckpointDirThatCannotBeWrittenIsAClearError) {
  std::ofstream(absl::StrCat(dir_, "/a-file")) << "x";
  v1::TaskSpec s = Spec();
  (*s.mutable_env())["TRAINYARD_CHECKPOINT_DIR"] = absl::StrCat(dir_, "/a-file/ckpt");
  auto launch = ToTaskLaunch(s, dir_);
  ASSERT_FALSE(launch.ok());
  EXPECT_THAT(launch.status().message(), HasSubstr(absl::StrCat("checkpoint dir ", dir_, "/a-file/ckpt cannot be written")));
}

}  // namespace
}  // namespace trainyard::agent
