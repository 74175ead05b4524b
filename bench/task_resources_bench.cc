// Task resources at scale (docs/task-resources.md): what the server's
// ResourceBook costs (heap bytes per task with a full 15 minutes of
// samples at the default 10 s; a sample recorded; a 1,000-task job's
// answer built and rendered as the REST route does; the /metrics sums over
// every task), and what the agent's sampler costs (one pass over this
// machine's /proc; 1,000 tasks sampled from cgroup v2 files, stood in by
// plain files in a temporary directory). Medians of --samples runs. A
// plain main() that prints a table.
//   build/<dir>/bench/task_resources_bench [--tasks=N] [--samples=N]
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "median.h"
#include "absl/strings/str_cat.h"
#include "agent/resource_limiter.h"
#include "agent/task_resources.h"
#include "server/http/resource_routes.h"
#include "server/resource_book.h"

namespace trainyard::server {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
constexpr int kTasksPerJob = 1000;
constexpr int kSamplesKept = 90;  // 15 minutes at 10 s

v1::TaskResources Sample(uint64_t job, int index, int i) {
  v1::TaskResources t;
  t.set_job(absl::StrCat("train-", job));
  t.set_job_id(job);
  t.set_role("worker");
  t.set_index(index);
  t.set_memory_limit_bytes(int64_t{64} << 30);
  t.set_source("cgroup v2");
  t.mutable_sample()->set_cpu_milli(3000 + i);
  t.mutable_sample()->set_memory_bytes((int64_t{40} << 30) + i);
  t.mutable_sample()->set_gpu_busy_milli(7000 + i);
  t.mutable_sample()->set_gpu_memory_bytes((int64_t{600} << 30) + i);
  return t;
}

using bench::MedianMs;

int Run(int tasks, int samples) {
  int jobs = std::max(1, tasks / kTasksPerJob);
  ResourceBook book({.keep_for = absl::Minutes(15), .max_tasks = tasks});
  size_t before = mallinfo2().uordblks;
  auto fill_start = std::chrono::steady_clock::now();
  int64_t recorded = 0;
  for (int i = 0; i < kSamplesKept; ++i) {
    absl::Time at = kNow - absl::Seconds(10) * (kSamplesKept - 1 - i);
    for (int j = 1; j <= jobs; ++j) {
      for (int k = 0; k < tasks / jobs; ++k, ++recorded) book.Record("node", Sample(j, k, i), at);
    }
  }
  double fill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - fill_start).count();
  size_t after = mallinfo2().uordblks;
  ResourceBook::Counts c = book.counts();
  std::printf("tasks kept, samples kept               %lld, %lld\n", static_cast<long long>(c.tasks),
              static_cast<long long>(c.samples));
  std::printf("heap per task (90 samples)             %.0f bytes (%.1f MB in all)\n",
              static_cast<double>(after - before) / tasks, static_cast<double>(after - before) / 1e6);
  std::printf("a sample recorded (message built too)  %.2f us\n", fill_ms * 1000 / recorded);

  v1::JobView view;
  view.set_name("train-1");
  view.set_id(1);
  for (int k = 0; k < tasks / jobs; ++k) {
    v1::TaskView* t = view.add_tasks();
    t->set_name(absl::StrCat("train-1-worker-", k));
    t->set_role("worker");
    t->set_index(k);
    t->set_node("node");
    t->set_state(v1::TASK_RUNNING);
    t->set_gpu_mask(0xff);
  }
  size_t bytes = 0;
  double build_ms = MedianMs(samples, [&] {
    v1::JobResourcesResponse r = BuildJobResources(view, book.Job(1, absl::InfinitePast()), 10000);
    bytes = static_cast<size_t>(r.ByteSizeLong());
  });
  std::printf("a %d-task job's answer built           %.2f ms (%.1f MB as protobuf)\n", tasks / jobs, build_ms,
              bytes / 1e6);
  v1::JobResourcesResponse r = BuildJobResources(view, book.Job(1, absl::InfinitePast()), 10000);
  double json_ms = MedianMs(samples, [&] { bytes = http::JobResourcesJson(r).size(); });
  std::printf("  rendered as the REST route's JSON    %.2f ms (%.1f MB)\n", json_ms, bytes / 1e6);
  double newest_ms = MedianMs(samples, [&] {
    bytes = http::JobResourcesJson(BuildJobResources(view, book.Job(1, absl::InfinitePast(), true), 10000, true)).size();
  });
  std::printf("  newest only (trainyard top)          %.2f ms (%.2f MB as JSON)\n", newest_ms, bytes / 1e6);
  size_t summed = 0;
  std::printf("/metrics sums over every task          %.2f ms\n",
              MedianMs(samples, [&] { summed = book.Now(kNow, absl::Seconds(30)).size(); }));

  // The agent's side.
  size_t procs = 0;
  double proc_ms = MedianMs(samples, [&] {
    agent::ProcessTable table = agent::ProcessTable::Read("/proc");
    procs += static_cast<size_t>(table.Tree(getpid()).processes);
  });
  std::printf("agent: one pass over /proc             %.2f ms\n", proc_ms);
  std::filesystem::path root = std::filesystem::temp_directory_path() / absl::StrCat("ty-bench-cg-", getpid());
  std::filesystem::create_directories(root / "trainyard");
  std::ofstream(root / "cgroup.controllers") << "cpu memory pids\n";
  std::ofstream(root / "cgroup.subtree_control") << "";
  std::ofstream(root / "trainyard" / "cgroup.subtree_control") << "";
  agent::ResourceLimiterPtr limiter = agent::DetectResourceLimiter({.cgroup_root = root.string(), .allow_v1 = false});
  std::vector<agent::ResourceTarget> targets;
  for (int k = 0; k < kTasksPerJob; ++k) {
    std::string name = absl::StrCat("t", k);
    std::filesystem::create_directories(root / "trainyard" / name);
    std::ofstream(root / "trainyard" / name / "cpu.stat") << "usage_usec " << 1000000 * k << "\nuser_usec 1\n";
    std::ofstream(root / "trainyard" / name / "memory.current") << (int64_t{1} << 30) << "\n";
    std::ofstream(root / "trainyard" / name / "memory.stat") << "anon 1\nfile 2\ninactive_file 4096\n";
    targets.push_back({.key = {"train", "worker", k, 1}, .attempt = 0, .job_id = 1, .pid = 1, .cgroup = name,
                       .started = kNow - absl::Hours(1), .memory_limit_mb = 2048});
  }
  agent::TaskResourceSampler sampler("/proc");
  int step = 0;
  double sample_ms = MedianMs(samples, [&] {
    summed += sampler.Sample(targets, *limiter, {}, false, kNow + absl::Seconds(10) * ++step).size();
  });
  std::printf("agent: %d tasks sampled from cgroups  %.2f ms (%.1f us a task)\n", kTasksPerJob, sample_ms,
              sample_ms * 1000 / kTasksPerJob);
  std::filesystem::remove_all(root);
  return summed > 0 && procs > 0 ? 0 : 1;
}

}  // namespace
}  // namespace trainyard::server

int main(int argc, char** argv) {
  int tasks = 20000, samples = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--tasks=", 0) == 0 && absl::SimpleAtoi(a.substr(8), &tasks) && tasks > 0) continue;
    if (a.rfind("--samples=", 0) == 0 && absl::SimpleAtoi(a.substr(10), &samples) && samples > 0) continue;
    if (a.rfind("--benchmark", 0) == 0) continue;  // make bench passes Google Benchmark flags
    std::fprintf(stderr, "usage: task_resources_bench [--tasks=N] [--samples=N]\n");
    return 2;
  }
  return trainyard::server::Run(tasks, samples);
}
