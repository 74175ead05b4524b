// Where a task may work (CheckWorkingDir after symlinks and ".."), and the
// confinement of a launch: the account, the workingDir check and, as root,
// the directories given to the account.
#include "agent/task_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

class WorkingDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/allowed";
    std::filesystem::create_directories(root_ + "/sub/deeper");
    std::filesystem::create_directories(dir_.path() + "/elsewhere");
    std::filesystem::create_directories(dir_.path() + "/allowed-not");
  }
  TempDir dir_;
  std::string root_;
};

TEST_F(WorkingDirTest, InsideAnAllowedRootIsAccepted) {
  EXPECT_TRUE(CheckWorkingDir(root_, {root_}).ok());
  EXPECT_TRUE(CheckWorkingDir(root_ + "/sub/deeper", {"/nonexistent", root_}).ok());
  EXPECT_TRUE(CheckWorkingDir(root_ + "/sub/../sub", {root_}).ok());
}

TEST_F(WorkingDirTest, ElsewhereIsRefusedNamingWorkingDir) {
  absl::Status s = CheckWorkingDir(dir_.path() + "/elsewhere", {root_});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("workingDir " + dir_.path() + "/elsewhere is not under a directory tasks may use ("
                                     + root_));
  // A name that only starts like the root is not under it.
  EXPECT_FALSE(CheckWorkingDir(dir_.path() + "/allowed-not", {root_}).ok());
  EXPECT_THAT(CheckWorkingDir("/", {}).message(), HasSubstr("(none;"));
}

TEST_F(WorkingDirTest, DotDotAndSymlinksAreResolvedFirst) {
  EXPECT_FALSE(CheckWorkingDir(root_ + "/../elsewhere", {root_}).ok());
  std::filesystem::create_directory_symlink(dir_.path() + "/elsewhere", root_ + "/link");
  absl::Status s = CheckWorkingDir(root_ + "/link", {root_});
  EXPECT_THAT(s.message(), HasSubstr("(" + dir_.path() + "/elsewhere)"));
  // A root given through a symlink still holds what lies under its target.
  std::filesystem::create_directory_symlink(root_, dir_.path() + "/root-link");
  EXPECT_TRUE(CheckWorkingDir(root_ + "/sub", {dir_.path() + "/root-link"}).ok());
}

TEST_F(WorkingDirTest, AMissingDirIsRefusedNamingWorkingDir) {
  EXPECT_THAT(CheckWorkingDir(root_ + "/missing", {root_}).message(),
              HasSubstr("workingDir " + root_ + "/missing: No such file or directory"));
}

TEST_F(WorkingDirTest, ConfineLaunchChecksTheUserAndTheWorkingDir) {
  TaskUsers users({.workdir_roots = {root_}, .switch_users = false});
  std::string task_dir = dir_.path() + "/work/j/w-0";
  std::filesystem::create_directories(task_dir);
  TaskLaunch launch{.key = {.job = "j", .role = "w"}, .working_dir = dir_.path() + "/elsewhere"};
  EXPECT_THAT(ConfineLaunch(users, task_dir, &launch).message(), HasSubstr("task j/w-0: workingDir "));
  launch.working_dir = task_dir;
  EXPECT_TRUE(ConfineLaunch(users, task_dir, &launch).ok());
  EXPECT_FALSE(launch.run_as.has_value());  // not switching: the agent's own account
}

TEST_F(WorkingDirTest, AsRootTheTaskGetsItsDirectories) {
  if (geteuid() != 0) GTEST_SKIP() << "giving directories to another account needs root";
  TaskUsers users({.map = *TaskUserMap::Parse("\"*\": 65534\n", "m"), .switch_users = true});
  std::string task_dir = dir_.path() + "/work/j/w-0";
  std::string checkpoints = dir_.path() + "/checkpoints/j.7";
  std::filesystem::create_directories(task_dir);
  std::ofstream(task_dir + "/hosts") << "127.0.0.1 j-w-0\n";
  TaskLaunch launch{.key = {.job = "j", .role = "w"}, .user = "alice", .working_dir = task_dir,
                    .checkpoint_dir = checkpoints};
  ASSERT_TRUE(ConfineLaunch(users, task_dir, &launch).ok());
  ASSERT_TRUE(launch.run_as.has_value());
  EXPECT_EQ(launch.run_as->uid, 65534u);
  for (const std::string& path : {task_dir, checkpoints, task_dir + "/hosts"}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, 65534u) << path;
  }
  struct stat ckpt, parent;
  ASSERT_EQ(stat(checkpoints.c_str(), &ckpt), 0);
  ASSERT_EQ(stat((dir_.path() + "/checkpoints").c_str(), &parent), 0);
  EXPECT_EQ(ckpt.st_mode & 07777, 0700u);
  EXPECT_EQ(parent.st_mode & 0066, 0u);  // others may pass, not list
  EXPECT_EQ(parent.st_mode & 0011, 0011u);
}

}  // namespace
}  // namespace trainyard::agent
