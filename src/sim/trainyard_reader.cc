// Reading Trainyard's own job trace (one CSV row per role of a gang) and
// choosing a reader by the header; see trace_readers.h and docs/sim.md.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

constexpr int64_t kMaxTasksPerRole = 100000;

absl::StatusOr<RoleSpec> ParseRole(const CsvRow& row) {
  RoleSpec role;
  role.name = row.Has("role") ? std::string(row.Text("role")) : "task";
  auto count = row.IntOr("count", 1);
  if (!count.ok()) return count.status();
  if (*count < 1 || *count > kMaxTasksPerRole) {
    return row.Error("count", absl::StrCat(*count, " is outside 1..", kMaxTasksPerRole));
  }
  auto gpus = row.Int("gpus");
  if (!gpus.ok()) return gpus.status();
  if (*gpus > kMaxGpusPerTask) {
    return row.Error("gpus", absl::StrCat(*gpus, " is above the most a node may have, ",
                                          kMaxGpusPerTask));
  }
  auto milli = row.IntOr("gpu_milli", *gpus > 0 ? 1000 : 0);
  if (!milli.ok()) return milli.status();
  if (*milli > 1000) return row.Error("gpu_milli", absl::StrCat(*milli, " is above 1000"));
  auto cpu = row.Int("cpu_milli");
  if (!cpu.ok()) return cpu.status();
  auto mem = row.Int("memory_mib");
  if (!mem.ok()) return mem.status();
  role.count = static_cast<int>(*count);
  role.gpus = static_cast<int>(*gpus);
  role.gpu_milli = static_cast<int>(*milli);
  role.rounded_up = *gpus > 0 && *milli < 1000;
  role.cpu_milli = *cpu;
  role.memory_mib = *mem;
  return role;
}

// Reads the job-level fields of `row` into `job`.
absl::Status ParseJobFields(const CsvRow& row, JobSpec* job) {
  job->name = std::string(row.Text("job"));
  if (job->name.empty()) return row.Error("job", "the job name is empty");
  job->line = row.line();
  auto submit = row.Int("submit_time");
  if (!submit.ok()) return submit.status();
  job->submit_s = *submit;
  auto duration = row.IntOr("duration", kRunsForever);
  if (!duration.ok()) return duration.status();
  job->duration_s = *duration;
  if (row.Has("queue")) job->queue = std::string(row.Text("queue"));
  job->user = std::string(row.Text("user"));
  auto priority = ParsePriorityClass(std::string(row.Text("priority")));
  if (!priority.ok()) return row.Error("priority", priority.status().message());
  job->priority = *priority;
  for (absl::string_view m : absl::StrSplit(row.Text("gpu_model"), '|', absl::SkipEmpty())) {
    job->gpu_models.emplace_back(m);
  }
  return absl::OkStatus();
}

// OK when `row`'s job-level fields equal those `job` was first read with.
absl::Status CheckSameJob(const CsvRow& row, const JobSpec& job) {
  JobSpec again;
  if (auto s = ParseJobFields(row, &again); !s.ok()) return s;
  auto differs = [&](absl::string_view field) {
    return row.Error(field, absl::StrCat("differs from the first row of job '", job.name,
                                         "' (line ", job.line, "); job fields must agree"));
  };
  if (again.submit_s != job.submit_s) return differs("submit_time");
  if (again.duration_s != job.duration_s) return differs("duration");
  if (again.queue != job.queue) return differs("queue");
  if (again.user != job.user) return differs("user");
  if (again.priority != job.priority) return differs("priority");
  if (again.gpu_models != job.gpu_models) return differs("gpu_model");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Trace> ParseTrainyardTrace(const CsvTable& table) {
  if (auto s = table.RequireColumns({"job", "submit_time", "gpus", "cpu_milli", "memory_mib"});
      !s.ok()) {
    return s;
  }
  Trace trace;
  trace.source = table.source();
  trace.format = "trainyard";
  absl::flat_hash_map<std::string, size_t> by_name;
  for (size_t i = 0; i < table.size(); ++i) {
    CsvRow row = table.row(i);
    auto role = ParseRole(row);
    if (!role.ok()) return role.status();
    auto [it, added] = by_name.emplace(std::string(row.Text("job")), trace.jobs.size());
    if (added) {
      JobSpec job;
      if (auto s = ParseJobFields(row, &job); !s.ok()) return s;
      trace.jobs.push_back(std::move(job));
    } else if (auto s = CheckSameJob(row, trace.jobs[it->second]); !s.ok()) {
      return s;
    }
    trace.task_count += role->count;
    if (role->rounded_up) trace.rounded_up_tasks += role->count;
    trace.jobs[it->second].roles.push_back(std::move(*role));
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const JobSpec& a, const JobSpec& b) { return a.submit_s < b.submit_s; });
  return trace;
}

absl::StatusOr<Trace> ParseTrace(const CsvTable& table) {
  if (table.HasColumn("num_gpu")) return ParseAlibabaPods(table);
  if (table.HasColumn("job")) return ParseTrainyardTrace(table);
  return absl::InvalidArgumentError(absl::StrCat(
      table.source(),
      ": unknown trace format; expected an Alibaba openb pod list "
      "(name,cpu_milli,memory_mib,num_gpu,gpu_milli,...) or a Trainyard job trace "
      "(job,submit_time,duration,role,count,gpus,cpu_milli,memory_mib,...)"));
}

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  auto table = CsvTable::ReadFile(path);
  if (!table.ok()) return table.status();
  return ParseTrace(*table);
}

}  // namespace trainyard::sim
