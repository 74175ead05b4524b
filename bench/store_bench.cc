// Store benchmarks: durable single-task job submissions from several threads
// with group commit against one transaction per job (fsync on in both), and
// recovery: opening a store with 10,000 nodes and 100,000 tasks and loading
// it. Prints the medians and the group-commit ratio at the end.
//   build/<dir>/bench/store_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recovery_store.h"
#include "store/sqlite_state_store.h"

namespace trainyard {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds between two instants.
double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Figures by name, one per repetition, for the summary.
std::map<std::string, std::vector<double>>& Figures() {
  static auto* figures = new std::map<std::string, std::vector<double>>();
  return *figures;
}

// CPU seconds this process has used, all threads.
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "trainyard_store_bench_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "/tmp/trainyard_store_bench";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

v1::JobRecord SingleTaskJob(uint64_t id) {
  v1::JobRecord job;
  job.set_id(id);
  job.set_name(absl::StrCat("job-", id));
  job.set_state(v1::JOB_QUEUED);
  job.set_submit_time_ms(1700000000000 + static_cast<int64_t>(id));
  job.set_pending_reason("waiting for 1 GPU");
  v1::JobSpec& spec = *job.mutable_spec();
  spec.set_name(job.name());
  spec.set_user("alice");
  spec.set_queue("default");
  v1::ReplicaSpec& replica = *spec.add_replicas();
  replica.set_role("worker");
  replica.set_count(1);
  replica.mutable_resources()->set_gpus(1);
  replica.mutable_resources()->set_memory_mb(16384);
  replica.mutable_resources()->set_vcores_milli(4000);
  replica.add_command("python3");
  replica.add_command("train.py");
  v1::TaskRecord& task = *job.add_tasks();
  task.set_role("worker");
  task.set_state(v1::TASK_PENDING);
  return job;
}

WriteBatch Submission(uint64_t id) {
  WriteBatch batch;
  v1::JobEventRecord event;
  event.set_time_ms(1700000000000);
  event.set_kind("submitted");
  event.set_text("submitted by alice");
  batch.CreateJob(SingleTaskJob(id), std::move(event));
  batch.PutMeta("next_job_id", absl::StrCat(id + 1));
  return batch;
}

// args: group commit (0/1), submitting threads, jobs per thread.
void BM_DurableSubmissions(benchmark::State& state) {
  const bool group = state.range(0) != 0;
  const int threads = static_cast<int>(state.range(1));
  const int per_thread = static_cast<int>(state.range(2));
  for (auto _ : state) {
    ScratchDir dir;
    SqliteStoreOptions options;
    options.sync = StoreSync::kFull;
    options.group_commit = group;
    absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir.path(), options);
    if (!store.ok()) {
      state.SkipWithError(std::string(store.status().message()).c_str());
      return;
    }
    std::atomic<int> failed{0};
    std::atomic<uint64_t> next_id{1};  // ids come in order, as the server hands them out
    double cpu_start = ProcessCpuSeconds();
    Clock::time_point start = Clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < per_thread; ++i) {
          if (!(*store)->Commit(Submission(next_id++)).ok()) ++failed;
        }
      });
    }
    for (std::thread& w : workers) w.join();
    double seconds = Since(start);
    double cpu_us_per_job = (ProcessCpuSeconds() - cpu_start) * 1e6 / (threads * per_thread);
    state.SetIterationTime(seconds);
    Figures()[group ? "group_cpu" : "single_cpu"].push_back(cpu_us_per_job);
    state.counters["cpu_us_per_job"] = cpu_us_per_job;
    StoreStats stats = (*store)->Stats();
    double rate = threads * per_thread / seconds;
    Figures()[group ? "group" : "single"].push_back(rate);
    state.counters["jobs_per_s"] = rate;
    state.counters["jobs_per_fsync"] =
        static_cast<double>(stats.batches_committed) / std::max<int64_t>(1, stats.transactions);
    state.counters["failed"] = failed.load();
  }
}
BENCHMARK(BM_DurableSubmissions)
    ->ArgNames({"group", "threads", "jobs_per_thread"})
    ->Args({1, 64, 250})
    ->Args({0, 64, 10})
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);

void BM_Recovery(benchmark::State& state) {
  ScratchDir dir;
  if (absl::Status s = bench::Fill(dir.path()); !s.ok()) {  // bench/recovery_store.h
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  for (auto _ : state) {
    Clock::time_point start = Clock::now();
    absl::StatusOr<StateStorePtr> store = SqliteStateStore::Open(dir.path());
    if (!store.ok()) {
      state.SkipWithError(std::string(store.status().message()).c_str());
      return;
    }
    double open_s = Since(start);
    absl::StatusOr<StoreSnapshot> snapshot = (*store)->LoadAll();
    double total_s = Since(start);
    size_t tasks = 0;
    for (const v1::JobRecord& job : snapshot->jobs) tasks += job.tasks_size();
    Clock::time_point check_start = Clock::now();
    absl::Status integrity = (*store)->CheckIntegrity();
    double check_s = Since(check_start);
    state.SetIterationTime(total_s);
    Figures()["open_ms"].push_back(open_s * 1e3);
    Figures()["load_ms"].push_back(total_s * 1e3);
    Figures()["check_ms"].push_back(check_s * 1e3);
    state.counters["nodes"] = static_cast<double>(snapshot->nodes.size());
    state.counters["tasks"] = static_cast<double>(tasks);
    state.counters["open_ms"] = open_s * 1e3;
    state.counters["check_integrity_ms"] = check_s * 1e3;
    state.counters["integrity_ok"] = integrity.ok() ? 1 : 0;
  }
}
BENCHMARK(BM_Recovery)->UseManualTime()->Iterations(1)->Repetitions(3)->Unit(
    benchmark::kMillisecond);

void PrintSummary() {
  auto& f = Figures();
  if (f.contains("group") && f.contains("single")) {
    double group = Median(f["group"]);
    double single = Median(f["single"]);
    std::printf(
        "\nDurable single-task submissions, fsync on, 64 threads (median of %zu):\n"
        "  group commit:             %8.0f jobs/s\n"
        "  one transaction per job:  %8.0f jobs/s\n"
        "  ratio:                    %8.1fx\n"
        "  CPU per job (all threads): %.0f us with group commit, %.0f us without\n",
        f["group"].size(), group, single, single > 0 ? group / single : 0.0,
        Median(f["group_cpu"]), Median(f["single_cpu"]));
  }
  if (f.contains("load_ms")) {
    std::printf(
        "Recovery, 10,000 nodes and 100,000 tasks (median of %zu):\n"
        "  open %.1f ms, open + LoadAll %.1f ms; CheckIntegrity %.1f ms\n",
        f["load_ms"].size(), Median(f["open_ms"]), Median(f["load_ms"]), Median(f["check_ms"]));
  }
}

}  // namespace
}  // namespace trainyard

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  trainyard::PrintSummary();
  return 0;
}
