// Sampling what tasks use: CPU as a rate between samples, memory, GPU load
// apportioned by share; cgroup figures where the attempt has them, its
// process tree (a fake /proc, and this test's own process) where not.
#include "agent/task_resources.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/test_util.h"
#include "gtest/gtest.h"

namespace trainyard::agent {
namespace {

using testing::TempDir;

// Cgroup figures the test sets per attempt name.
class FakeLimiter : public ResourceLimiter {
 public:
  LimiterKind kind() const override { return LimiterKind::kCgroupV2; }
  const Confinement& confinement() const override { return confinement_; }
  absl::StatusOr<PreparedLimits> Prepare(const std::string&, const TaskLimits&) override { return PreparedLimits{}; }
  bool OomKilled(const std::string&) override { return false; }
  void Release(const std::string&) override {}
  CgroupUsage Usage(const std::string& name) const override {
    auto it = use.find(name);
    return it == use.end() ? CgroupUsage{} : it->second;
  }
  std::map<std::string, CgroupUsage> use;

 private:
  Confinement confinement_;
};

// PROC/PID/stat as the kernel writes it (fields 14-17 CPU ticks, 24 RSS
// pages).
void FakeProc(const std::string& proc, pid_t pid, pid_t ppid, int64_t ticks, int64_t rss_pages) {
  std::filesystem::create_directories(absl::StrCat(proc, "/", pid));
  std::ofstream(absl::StrCat(proc, "/", pid, "/stat"))
      << pid << " (a (strange) name) S " << ppid << " 1 1 0 -1 4194304 100 0 0 0 " << ticks << " 0 0 0 20 0 1 0 "
      << "12345 1000000 " << rss_pages << " 18446744073709551615\n";
}

const absl::Time kTaskResourcesT0 = absl::FromUnixSeconds(1700000000);

TEST(TaskResourcesTest, CpuIsTheRateSinceTheLastSampleAndMemoryAsTheCgroupSays) {
  FakeLimiter limiter;
  ResourceTarget t{.key = {"j", "w", 0, 7}, .attempt = 1, .job_id = 7, .pid = 0, .cgroup = "c1",
                   .started = kTaskResourcesT0, .memory_limit_mb = 100};
  TaskResourceSampler sampler("/nonexistent");
  limiter.use["c1"] = {.cpu_ns = 2'000'000'000, .memory_bytes = 50 << 20, .source = "cgroup v2"};
  std::vector<ResourceSample> s = sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0 + absl::Seconds(4));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cpu_milli, 500) << "2 s of CPU over the 4 s since it started";
  EXPECT_EQ(s[0].memory_bytes, 50 << 20);
  EXPECT_EQ(s[0].memory_limit_bytes, int64_t{100} << 20);
  EXPECT_EQ(s[0].source, "cgroup v2");
  EXPECT_EQ(s[0].job_id, 7u);
  EXPECT_EQ(s[0].time, kTaskResourcesT0 + absl::Seconds(4));

  limiter.use["c1"].cpu_ns = 5'000'000'000;  // 3 s more over the next 2 s
  s = sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0 + absl::Seconds(6));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cpu_milli, 1500);

  // A new attempt counts from its own start, not from the last one's figures.
  t.attempt = 2;
  t.started = kTaskResourcesT0 + absl::Seconds(7);
  limiter.use["c1"].cpu_ns = 100'000'000;
  s = sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0 + absl::Seconds(8));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cpu_milli, 100);
}

TEST(TaskResourcesTest, WithoutACgroupTheProcessTreeIsSummed) {
  TempDir dir;
  std::string proc = dir.path();
  long hz = sysconf(_SC_CLK_TCK);
  long page = sysconf(_SC_PAGESIZE);
  FakeProc(proc, 100, 1, hz * 1, 100);     // the task's first process
  FakeProc(proc, 101, 100, hz * 2, 200);   // its child
  FakeProc(proc, 102, 101, hz * 1, 50);    // a grandchild
  FakeProc(proc, 200, 1, hz * 50, 9999);   // another task's
  ProcessTable table = ProcessTable::Read(proc);
  ProcessTable::TreeUse tree = table.Tree(100);
  EXPECT_EQ(tree.processes, 3);
  EXPECT_EQ(tree.cpu_ns, 4'000'000'000);
  EXPECT_EQ(tree.rss_bytes, 350 * page);
  EXPECT_EQ(table.Tree(300).processes, 0);

  FakeLimiter limiter;  // no cgroup for this attempt
  TaskResourceSampler sampler(proc);
  ResourceTarget t{.key = {"j", "w", 0, 0}, .pid = 100, .started = kTaskResourcesT0};
  std::vector<ResourceSample> s = sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0 + absl::Seconds(8));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cpu_milli, 500);
  EXPECT_EQ(s[0].memory_bytes, 350 * page);
  EXPECT_EQ(s[0].source, "process tree");
  // An attempt whose process is gone is not sampled.
  t.pid = 300;
  EXPECT_TRUE(sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0 + absl::Seconds(9)).empty());
}

TEST(TaskResourcesTest, ThisProcessHasATreeInTheRealProc) {
  ProcessTable table = ProcessTable::Read();
  ProcessTable::TreeUse me = table.Tree(getpid());
  EXPECT_GE(me.processes, 1);
  EXPECT_GT(me.rss_bytes, 0);
}

TEST(TaskResourcesTest, AGpusLoadIsApportionedByTheSharesHeld) {
  FakeLimiter limiter;
  for (const char* c : {"a", "b", "c", "d"}) limiter.use[c] = {.cpu_ns = 0, .memory_bytes = 1};
  GpuInfo g0{.index = 0, .memory_used_mb = 8000, .memory_total_mb = 16000, .utilization_percent = 60};
  GpuInfo g1{.index = 1, .memory_used_mb = 1000, .memory_total_mb = 16000, .utilization_percent = 20};
  GpuInfo g2{.index = 2, .memory_used_mb = 3000, .memory_total_mb = 16000, .utilization_percent = -1};  // MIG
  auto gpus = [](std::vector<int> i) { return *core::GpuSet::FromIndices(i); };
  std::vector<ResourceTarget> targets = {
      {.key = {"j", "a", 0, 1}, .cgroup = "a", .started = kTaskResourcesT0, .gpus = gpus({0}), .gpu_milli = 250},
      {.key = {"j", "b", 0, 1}, .cgroup = "b", .started = kTaskResourcesT0, .gpus = gpus({0}), .gpu_milli = 750},
      {.key = {"j", "c", 0, 1}, .cgroup = "c", .started = kTaskResourcesT0, .gpus = gpus({1})},
      {.key = {"j", "d", 0, 1}, .cgroup = "d", .started = kTaskResourcesT0, .gpus = gpus({2})},
  };
  TaskResourceSampler sampler("/nonexistent");
  std::vector<ResourceSample> s = sampler.Sample(targets, limiter, {g0, g1, g2}, false, kTaskResourcesT0 + absl::Seconds(1));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].gpu_busy_milli, 150);  // a quarter of 600
  EXPECT_EQ(s[1].gpu_busy_milli, 450);
  EXPECT_EQ(s[0].gpu_memory_bytes, int64_t{2000} << 20);
  EXPECT_EQ(s[1].gpu_memory_bytes, int64_t{6000} << 20);
  EXPECT_EQ(s[2].gpu_busy_milli, 200);
  EXPECT_EQ(s[3].gpu_busy_milli, -1) << "a real GPU that does not tell its load: not known, not busy";
  EXPECT_EQ(s[3].gpu_memory_bytes, int64_t{3000} << 20);

  // Simulated GPUs have no load: busy for the share held, memory at least that share.
  TaskResourceSampler sim("/nonexistent");
  s = sim.Sample({targets[0], targets[3]}, limiter, {g0, g1, g2}, true, kTaskResourcesT0 + absl::Seconds(1));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].gpu_busy_milli, 250);
  EXPECT_EQ(s[1].gpu_busy_milli, 1000);
  EXPECT_EQ(s[1].gpu_memory_bytes, int64_t{16000} << 20);
}

TEST(TaskResourcesTest, AnAdoptedAttemptsFirstSampleHasNoRateItsNextHas) {
  FakeLimiter limiter;
  limiter.use["c"] = {.cpu_ns = int64_t{200} * 24 * 3600 * 1'000'000'000, .memory_bytes = 1};  // 200 core-days
  ResourceTarget t{.key = {"j", "w", 0, 1}, .cgroup = "c"};  // started: not known
  TaskResourceSampler sampler("/nonexistent");
  std::vector<ResourceSample> s = sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cpu_milli, 0);
  *limiter.use["c"].cpu_ns += 4'000'000'000;  // 4 s over the next 2 s
  s = sampler.Sample({t}, limiter, {}, false, kTaskResourcesT0 + absl::Seconds(2));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cpu_milli, 2000);
}

}  // namespace
}  // namespace trainyard::agent
