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

  // What it uses: CPU time in all, memory less its inactive file cache.
  Touch(task + "/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
  Touch(task + "/memory.current", "104857600\n");
  Touch(task + "/memory.stat", "anon 83886080\nfile 20971520\nactive_file 10485760\ninactive_file 10485760\n");
  CgroupUsage use = limiter->Usage("job_w-0_a0");
  EXPECT_EQ(use.cpu_ns, 2500000000);
  EXPECT_EQ(use.memory_bytes, 94371840);
  EXPECT_EQ(use.source, "cgroup v2");
  CgroupUsage gone = limiter->Usage("released");
  EXPECT_FALSE(gone.cpu_ns.has_value());
  EXPECT_FALSE(gone.memory_bytes.has_value());
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

  Touch(cpu + "/cpuacct.usage", "1500000000\n");
  Touch(mem + "/memory.usage_in_bytes", "52428800\n");
  Touch(mem + "/memory.stat", "cache 4194304\nrss 48234496\ntotal_inactive_file 2097152\n");
  CgroupUsage use = limiter->Usage("x");
  EXPECT_EQ(use.cpu_ns, 1500000000);
  EXPECT_EQ(use.memory_bytes, 50331648);
  EXPECT_EQ(use.source, "cgroup v1");
}

TEST(ResourceLimiterTest, WithoutCgroupsTasksRunUnconfinedAndSaySo) {
  TempDir dir;
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = dir.path()});
  ASSERT_EQ(limiter->kind(), LimiterKind::kNone);
  absl::StatusOr<PreparedLimits> prepared = limiter->Prepare("x", {.memory_limit_mb = 3});
  ASSERT_TRUE(prepared.ok());
  EXPECT_TRUE(prepared->procs_files.empty());
  EXPECT_FALSE(limiter->OomKilled("x"));
  EXPECT_THAT(DescribeConfinement(limiter->confinement()),
              HasSubstr("memory: not enforced, cpu: not enforced, pids: not enforced (no writable cgroup: "));
  EnforcedLimits e = EnforcedFor(limiter->confinement(), {.memory_limit_mb = 512, .vcores_milli = 500, .pids_max = 0});
  EXPECT_EQ(e.memory_mb, 512);
  EXPECT_EQ(e.memory_by, "");
  EXPECT_EQ(e.cpu_by, "");
  EXPECT_THAT(e.why_not, HasSubstr("no writable cgroup"));
}

// A v1 tree whose controllers' hierarchies exist but where the agent cannot
// create cgroups under its own (a file stands where its cgroup should be:
// what the kernel's refusal looks like to mkdir, for root too).
TEST(ResourceLimiterTest, UnwritableV1IsNotUsed) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/memory/memory.limit_in_bytes");
  Touch(root + "/cpu/cpu.cfs_quota_us");
  Touch(root + "/pids/cgroup.procs");
  Touch(root + "/self_cgroup", "8:pids:/box\n4:memory:/box\n1:cpu,cpuacct:/box\n0::/\n");
  for (const char* c : {"/memory/box", "/cpu/box", "/pids/box"}) Touch(root + c, "not a directory");
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = root, .proc_self_cgroup = root + "/self_cgroup"});
  EXPECT_EQ(limiter->kind(), LimiterKind::kNone);
  EXPECT_THAT(limiter->confinement().why_not, HasSubstr("cannot create " + root + "/memory/box/trainyard"));
}

// Only some v1 controllers writable: those are used, the others said to be
// not enforced.
TEST(ResourceLimiterTest, V1UsesEachControllerThatIsWritable) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/memory/memory.limit_in_bytes");
  Touch(root + "/pids/cgroup.procs");
  Touch(root + "/self_cgroup", "8:pids:/\n4:memory:/\n");
  Touch(root + "/pids/trainyard", "not a directory");
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = root, .proc_self_cgroup = root + "/self_cgroup"});
  ASSERT_EQ(limiter->kind(), LimiterKind::kCgroupV1);
  const Confinement& c = limiter->confinement();
  EXPECT_EQ(c.memory, "cgroup v1");
  EXPECT_EQ(c.cpu, "");
  EXPECT_EQ(c.pids, "");
  EXPECT_THAT(DescribeConfinement(c), HasSubstr("memory: cgroup v1, cpu: not enforced, pids: not enforced ("));
  EXPECT_THAT(c.why_not, HasSubstr("no v1 cpu controller"));
  EXPECT_THAT(c.why_not, HasSubstr("cannot create " + root + "/pids/trainyard"));
  std::string mem = root + "/memory/trainyard/t";
  for (const char* f : {"/memory.limit_in_bytes", "/cgroup.procs"}) Touch(mem + f);
  absl::StatusOr<PreparedLimits> prepared = limiter->Prepare("t", {.memory_limit_mb = 1, .vcores_milli = 100, .pids_max = 9});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->procs_files, std::vector<std::string>{mem + "/cgroup.procs"});
  EXPECT_EQ(ReadFileOrEmpty(mem + "/memory.limit_in_bytes"), "1048576");
}

// cgroup v2 whose root the agent may not write (not root), with the agent
// in a subgroup of a cgroup systemd delegated to its user: the delegated
// cgroup is used, with the controllers delegated (memory and pids; no cpu).
TEST(ResourceLimiterTest, UsesADelegatedV2SubtreeWhenTheRootIsNotWritable) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  std::filesystem::create_directories(root + "/cgroup.subtree_control");  // refuses a write
  std::filesystem::create_directories(root + "/trainyard/cgroup.subtree_control");
  std::string base = root + "/user.slice/user@1000.service/app.slice/trainyard-agent.service";
  Touch(base + "/cgroup.controllers", "memory pids\n");
  Touch(base + "/cgroup.subtree_control");
  Touch(base + "/trainyard/cgroup.subtree_control");
  Touch(root + "/self_cgroup", "0::/user.slice/user@1000.service/app.slice/trainyard-agent.service/agent\n");
  ResourceLimiterPtr limiter =
      DetectResourceLimiter({.cgroup_root = root, .proc_self_cgroup = root + "/self_cgroup", .allow_v1 = false});
  ASSERT_EQ(limiter->kind(), LimiterKind::kCgroupV2);
  const Confinement& c = limiter->confinement();
  EXPECT_EQ(c.where, base + "/trainyard");
  EXPECT_EQ(DescribeConfinement(c),
            "memory: cgroup v2, cpu: not enforced, pids: cgroup v2 (the cpu controller is not delegated to " + base + ")");
  EXPECT_EQ(ReadFileOrEmpty(base + "/cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(ReadFileOrEmpty(base + "/trainyard/cgroup.subtree_control"), "+memory +pids");
  std::string task = base + "/trainyard/a";
  for (const char* f : {"/memory.max", "/pids.max", "/cgroup.procs"}) Touch(task + f);
  absl::StatusOr<PreparedLimits> prepared = limiter->Prepare("a", {.memory_limit_mb = 2, .vcores_milli = 500, .pids_max = 7});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(ReadFileOrEmpty(task + "/memory.max"), "2097152");
  EXPECT_EQ(ReadFileOrEmpty(task + "/pids.max"), "7");
  EXPECT_FALSE(std::filesystem::exists(task + "/cpu.max"));
  EnforcedLimits e = EnforcedFor(c, {.memory_limit_mb = 2, .vcores_milli = 500, .pids_max = 7});
  EXPECT_EQ(e, (EnforcedLimits{.memory_mb = 2, .memory_by = "cgroup v2", .vcores_milli = 500, .pids_max = 7,
                               .pids_by = "cgroup v2", .why_not = c.why_not}));
}

// Neither the root nor the parent of the agent's own cgroup writable.
TEST(ResourceLimiterTest, V2WithNothingWritableIsNotUsed) {
  TempDir dir;
  std::string root = dir.path();
  Touch(root + "/cgroup.controllers", "cpu memory pids\n");
  Touch(root + "/trainyard", "not a directory");
  Touch(root + "/system.slice/cgroup.controllers", "cpu memory pids\n");
  Touch(root + "/system.slice/trainyard", "not a directory");
  Touch(root + "/self_cgroup", "0::/system.slice/agent.service\n");
  ResourceLimiterPtr limiter = DetectResourceLimiter({.cgroup_root = root, .proc_self_cgroup = root + "/self_cgroup"});
  EXPECT_EQ(limiter->kind(), LimiterKind::kNone);
  EXPECT_THAT(limiter->confinement().why_not, HasSubstr("cannot create " + root + "/system.slice/trainyard"));
}

TEST(ResourceLimiterTest, CgroupSafeName) {
  EXPECT_EQ(CgroupSafeName("my job/worker-0 a1"), "my_job_worker-0_a1");
}

}  // namespace
}  // namespace trainyard::agent
