// Work dir reclaiming: which dirs fall due at an explicit time, and a
// removal that takes a task's planted links away without following them.
#include "agent/task_dir_reclaim.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::ReadFileOrEmpty;
using testing::TempDir;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(DueWorkDirsTest, AnEndedTasksDirFallsDueWhenItsRetentionHasPassed) {
  std::vector<WorkDirEntry> dirs = {{"job_7/worker-0", kT0}};
  std::map<std::string, absl::Time> ended = {{"job_7/worker-0", kT0 + absl::Minutes(5)}};
  absl::Duration hour = absl::Hours(1);
  EXPECT_THAT(DueWorkDirs(dirs, {}, ended, hour, kT0 + absl::Minutes(64)), IsEmpty());
  EXPECT_THAT(DueWorkDirs(dirs, {}, ended, hour, kT0 + absl::Minutes(65)), ElementsAre("job_7/worker-0"));
}

TEST(DueWorkDirsTest, ALiveTasksDirIsNeverDue) {
  std::vector<WorkDirEntry> dirs = {{"job_7/worker-0", kT0}, {"job_7/worker-1", kT0}};
  std::map<std::string, absl::Time> ended = {{"job_7/worker-1", kT0}};
  // worker-1 ended once and runs again (a restart): its old end does not count.
  EXPECT_THAT(DueWorkDirs(dirs, {"job_7/worker-0", "job_7/worker-1"}, ended, absl::ZeroDuration(), kT0 + absl::Hours(99)),
              IsEmpty());
}

TEST(DueWorkDirsTest, ZeroRetentionReclaimsAtOnce) {
  std::vector<WorkDirEntry> dirs = {{"job_7/worker-0", kT0}};
  EXPECT_THAT(DueWorkDirs(dirs, {}, {{"job_7/worker-0", kT0}}, absl::ZeroDuration(), kT0),
              ElementsAre("job_7/worker-0"));
}

TEST(DueWorkDirsTest, ALeftoverThisAgentNeverSawEndGoesByItsLastChange) {
  // Ended while the agent was down, or by an agent before it.
  std::vector<WorkDirEntry> dirs = {{"old/worker-0", kT0}};
  EXPECT_THAT(DueWorkDirs(dirs, {}, {}, absl::Hours(1), kT0 + absl::Minutes(59)), IsEmpty());
  EXPECT_THAT(DueWorkDirs(dirs, {}, {}, absl::Hours(1), kT0 + absl::Hours(1)), ElementsAre("old/worker-0"));
}

TEST(WorkDirTrashTest, ListsTaskDirsTwoLevelsDownAndSkipsLinksAndHiddenNames) {
  TempDir dir;
  std::string work = dir.path() + "/work";
  std::filesystem::create_directories(work + "/job_7/worker-0");
  std::filesystem::create_directories(work + "/.reclaim/x/y");
  std::filesystem::create_symlink("/etc", work + "/job_7/worker-1");
  std::filesystem::create_symlink("/", work + "/linked-job");
  std::vector<WorkDirEntry> dirs = ListWorkDirs(work);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0].place, "job_7/worker-0");
}

TEST(WorkDirTrashTest, RemovesATaskDirButNeverWhatItsLinksPointAt) {
  TempDir dir;
  std::string work = dir.path() + "/work", outside = dir.path() + "/outside";
  Write(outside + "/precious", "keep me\n");
  std::string task = work + "/job_7/worker-0";
  Write(task + "/scratch/data.bin", std::string(64 << 10, 'x'));
  std::filesystem::create_symlink(outside, task + "/to-outside");
  std::filesystem::create_symlink(outside + "/precious", task + "/scratch/to-precious");
  std::filesystem::create_hard_link(outside + "/precious", task + "/hard-precious");

  ASSERT_TRUE(MoveToTrash(work, "job_7/worker-0").ok());
  EXPECT_FALSE(std::filesystem::exists(task));
  TrashEmptied emptied = EmptyTrash(work);
  ASSERT_TRUE(emptied.status.ok()) << emptied.status;
  EXPECT_GE(emptied.freed_bytes, 64 << 10);
  EXPECT_EQ(ReadFileOrEmpty(outside + "/precious"), "keep me\n");
  EXPECT_TRUE(std::filesystem::is_empty(work + "/.reclaim"));
  RemoveIfEmpty(work, "job_7");
  EXPECT_FALSE(std::filesystem::exists(work + "/job_7"));
  EXPECT_TRUE(absl::IsNotFound(MoveToTrash(work, "job_7/worker-0")));
}

TEST(WorkDirTrashTest, RemovesATreeDeeperThanItRecursesAndDirsItsOwnerClosed) {
  TempDir dir;
  std::string work = dir.path() + "/work";
  std::string path = work + "/job_7/worker-0";
  for (int i = 0; i < 200; ++i) path += "/d";
  Write(path + "/leaf", "x");
  std::filesystem::create_directories(work + "/job_7/worker-0/closed/inner");
  chmod((work + "/job_7/worker-0/closed").c_str(), 0);
  ASSERT_TRUE(MoveToTrash(work, "job_7/worker-0").ok());
  TrashEmptied emptied = EmptyTrash(work);
  EXPECT_TRUE(emptied.status.ok()) << emptied.status;
  EXPECT_TRUE(std::filesystem::is_empty(work + "/.reclaim"));
}

}  // namespace
}  // namespace trainyard::agent
