// Reading Alibaba openb pod lists (cluster-trace-gpu-v2023) as one-task
// jobs; see trace_readers.h for the rules and docs/sim.md for the format.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

constexpr int64_t kWholeGpuMilli = 1000;

// Fills the role's sizes from num_gpu / gpu_milli, rounding shares up.
absl::Status ParseGpus(const CsvRow& row, RoleSpec* role) {
  auto num_gpu = row.Int("num_gpu");
  if (!num_gpu.ok()) return num_gpu.status();
  auto gpu_milli = row.Int("gpu_milli");
  if (!gpu_milli.ok()) return gpu_milli.status();
  if (*num_gpu > kMaxGpusPerTask) {
    return row.Error("num_gpu", absl::StrCat(*num_gpu, " is above the most a node may have, ",
                                             kMaxGpusPerTask));
  }
  if (*gpu_milli > kWholeGpuMilli) {
    return row.Error("gpu_milli", absl::StrCat(*gpu_milli, " is above 1000 (one whole GPU)"));
  }
  if (*num_gpu == 0 && *gpu_milli > 0) {
    return row.Error("gpu_milli", absl::StrCat(*gpu_milli, " asks for a GPU share but num_gpu is 0"));
  }
  role->gpus = static_cast<int>(*num_gpu);
  role->gpu_milli = static_cast<int>(*num_gpu == 0 ? 0 : *gpu_milli);
  role->rounded_up = *num_gpu > 0 && *gpu_milli < kWholeGpuMilli;
  return absl::OkStatus();
}

// Sets submit time and run time from the time columns, when present.
absl::Status ParseTimes(const CsvRow& row, int64_t index, JobSpec* job) {
  auto created = row.IntOr("creation_time", index);
  if (!created.ok()) return created.status();
  job->submit_s = *created;
  if (!row.Has("deletion_time")) return absl::OkStatus();
  auto deleted = row.Int("deletion_time");
  if (!deleted.ok()) return deleted.status();
  auto started = row.IntOr("scheduled_time", *created);
  if (!started.ok()) return started.status();
  if (*deleted < *created) {
    return row.Error("deletion_time", absl::StrCat(*deleted, " is before creation_time ", *created));
  }
  if (*started < *created || *started > *deleted) {
    return row.Error("scheduled_time", absl::StrCat(*started, " is outside creation_time ",
                                                    *created, " .. deletion_time ", *deleted));
  }
  job->duration_s = *deleted - *started;
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> ParsePod(const CsvRow& row, int64_t index) {
  JobSpec job;
  job.line = row.line();
  job.name = std::string(row.Text("name"));
  if (job.name.empty()) return row.Error("name", "the pod name is empty");
  RoleSpec role;
  auto cpu = row.Int("cpu_milli");
  if (!cpu.ok()) return cpu.status();
  auto mem = row.Int("memory_mib");
  if (!mem.ok()) return mem.status();
  role.cpu_milli = *cpu;
  role.memory_mib = *mem;
  if (auto s = ParseGpus(row, &role); !s.ok()) return s;
  if (auto s = ParseTimes(row, index, &job); !s.ok()) return s;
  for (absl::string_view model : absl::StrSplit(row.Text("gpu_spec"), '|', absl::SkipEmpty())) {
    job.gpu_models.emplace_back(model);
  }
  job.roles.push_back(role);
  return job;
}

}  // namespace

absl::StatusOr<Trace> ParseAlibabaPods(const CsvTable& table) {
  if (auto s = table.RequireColumns({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
      !s.ok()) {
    return s;
  }
  Trace trace;
  trace.source = table.source();
  trace.format = "alibaba-openb";
  trace.jobs.reserve(table.size());
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < table.size(); ++i) {
    auto job = ParsePod(table.row(i), static_cast<int64_t>(i));
    if (!job.ok()) return job.status();
    if (!names.insert(job->name).second) {
      return table.row(i).Error("name", absl::StrCat("pod '", job->name, "' is listed twice"));
    }
    trace.task_count += 1;
    if (job->roles.front().rounded_up) trace.rounded_up_tasks += 1;
    trace.jobs.push_back(std::move(*job));
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const JobSpec& a, const JobSpec& b) { return a.submit_s < b.submit_s; });
  return trace;
}

}  // namespace trainyard::sim
