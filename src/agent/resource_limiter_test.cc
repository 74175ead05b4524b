// Limiter detection and cgroup file handling against fake cgroup trees in a
// temporary directory (the kernel's files are stood in for by plain files),
// so the v2 path is covered on machines that mount v1 and vice versa. Real
// cgroups are exercised in supervisor_limits_test.cc.
#include "agent/resource_limiter.h"

#include <fstream>

#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::TempDir;

void Touch(const std::string& path, const std::string& content = "") {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << content;
}

TEST(ResourceLimiterTest, UsesCgroupV2WhenUnifiedHierarchyHasMemory) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  Touch(root + "/cgroup.subtree_control");
  Touch(root + "/trainyard/cgroup.subtree_control");
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = root, .allow_v1 = false});
  ASSERT_EQ(limiter->kind(), LimiterKind::kCgroupV2);
  EXPECT_EQ(ReadFileOrEmpty(root + "/trainyard/cgroup.subtree_control"), "+memory +cpu +pids");

  std::string task = root + "/trainyard/job_w-0_a0";
  for (const char* f : {"/memory.max", "/cpu.max", "/pids.max", "/cgroup.procs", "/memory.events"}) Touch(task + f);
  absl::StatusOr<PreparedLimits> prepared =
      limiter->Prepare("job_w-0_a0", {.memory_limit_mb = 64, .vcores_milli = 500, .pids_max = 64});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(ReadFileOrEmpty(task + "/memory.max"), "67108864");
  EXPECT_EQ(ReadFileOrEmpty(task + "/pids.max"), "64");
  EXPECT_EQ(ReadFileOrEmpty(task + "/cpu.max"), "50000 100000");
  ASSERT_EQ(prepared->procs_files.size(), 1u);
  EXPECT_EQ(prepared->procs_files[0], task + "/cgroup.procs");
  EXPECT_FALSE(limiter->OomKilled("job_w-0_a0"));
  Touch(task + "/memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n");
  EXPECT_TRUE(limiter->OomKilled("job_w-0_a0"));
}

TEST(ResourceLimiterTest, V2PrepareErrorNamesTheFile) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/cgroup.controllers", "cpu memory\n");
  Touch(root + "/cgroup.subtree_control");
  Touch(root + "/trainyard/cgroup.subtree_control");
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = root, .allow_v1 = false});
  ASSERT_EQ(limiter->kind(), LimiterKind::kCgroupV2);
  absl::StatusOr<PreparedLimits> prepared = limiter->Prepare("t", {.memory_limit_mb = 1});
  EXPECT_THAT(prepared.status().message(), HasSubstr(root + "/trainyard/t/memory.max"));
}

TEST(ResourceLimiterTest, UsesCgroupV1UnderTheAgentsOwnCgroup) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/memory/memory.limit_in_bytes");
  Touch(root + "/cpu/cpu.cfs_quota_us");
  Touch(root + "/pids/cgroup.procs");
  Touch(root + "/self_cgroup", "9:name=systemd:/\n8:pids:/box\n4:memory:/box/7\n1:cpu,cpuacct:/box\n0::/\n");
  std::filesystem::create_directories(root + "/memory/box/7");  // the agent's own cgroups
  std::filesystem::create_directories(root + "/cpu/box");
  std::filesystem::create_directories(root + "/pids/box");
  ResourceLimiterPtr limiter =
      DetectResourceLimiter({.cgroup_root = root, .proc_self_cgroup = root + "/self_cgroup", .allow_v2 = false});
  ASSERT_EQ(limiter->kind(), LimiterKind::kCgroupV1);
  std::string mem = root + "/memory/box/7/trainyard/x";
  std::string cpu = root + "/cpu/box/trainyard/x";
  for (const char* f : {"/memory.limit_in_bytes", "/cgroup.procs", "/memory.oom_control"}) Touch(mem + f);
  for (const char* f : {"/cpu.cfs_period_us", "/cpu.cfs_quota_us", "/cgroup.procs"}) Touch(cpu + f);
  std::string pids = root + "/pids/box/trainyard/x";
  for (const char* f : {"/pids.max", "/cgroup.procs"}) Touch(pids + f);
  absl::StatusOr<PreparedLimits> prepared =
      limiter->Prepare("x", {.memory_limit_mb = 2, .vcores_milli = 1500, .pids_max = 64});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(ReadFileOrEmpty(mem + "/memory.limit_in_bytes"), "2097152");
  EXPECT_EQ(ReadFileOrEmpty(cpu + "/cpu.cfs_quota_us"), "150000");
  EXPECT_EQ(ReadFileOrEmpty(pids + "/pids.max"), "64");
  EXPECT_EQ(prepared->procs_files.size(), 3u);
  Touch(mem + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
  EXPECT_FALSE(limiter->OomKilled("x"));
  Touch(mem + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  EXPECT_TRUE(limiter->OomKilled("x"));
}

TEST(ResourceLimiterTest, FallsBackToRlimits) {
  TempDir dir;
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = dir.path()});
  ASSERT_EQ(limiter->kind(), LimiterKind::kRlimit);
  absl::StatusOr<PreparedLimits> prepared = limiter->Prepare("x", {.memory_limit_mb = 3});
  ASSERT_TRUE(prepared.ok());
  EXPECT_EQ(prepared->address_space_bytes, 3u << 20);
  EXPECT_TRUE(prepared->procs_files.empty());
  EXPECT_FALSE(limiter->OomKilled("x"));
}

TEST(ResourceLimiterTest, CgroupSafeName) {
  EXPECT_EQ(CgroupSafeName("my job/worker-0 a1"), "my_job_worker-0_a1");
}

}  // namespace
}  // namespace trainyard::agent
