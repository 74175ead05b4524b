// The submit-time check of what execve will take; see exec_size.h. The
// variables Trainyard adds come from api::BuildTaskEnv itself, for a
// stand-in placement, so the estimate follows the one place that decides
// them.
#include "api/exec_size.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "api/roles.h"
#include "api/task_env.h"

namespace trainyard::api {
namespace {

// A string's cost in execve's count: its bytes, its NUL, its pointer.
int64_t Cost(size_t bytes) { return static_cast<int64_t>(bytes + 1 + sizeof(char*)); }

std::vector<PlacedTaskView> StandInPlacement(const v1::JobSpec& spec) {
  std::vector<PlacedTaskView> tasks;
  int worker_id = 0;
  for (const auto& rs : spec.replicas()) {
    const v1::Resource& r = rs.resources();
    int gpus = std::clamp(r.gpus(), 0, 64);
    uint64_t mask = r.gpu_mask() ? r.gpu_mask() : gpus >= 64 ? ~0ull : (1ull << gpus) - 1;
    std::vector<uint32_t> ports(std::clamp(r.port_count(), 0, 65535), 65535);
    for (const auto& p : r.ports()) {
      for (uint32_t port = p.begin(); port <= p.end() && ports.size() < 65536; ++port) ports.push_back(port);
    }
    for (int i = 0; i < std::clamp(rs.count(), 0, 10000); ++i) {
      tasks.push_back({.role = rs.role(), .index = i, .worker_id = worker_id++, .node = std::string(63, 'n'),
                       .address = "255.255.255.255", .gpu_mask = mask, .ports = ports});
    }
  }
  return tasks;
}

void CheckRole(const v1::ReplicaSpec& rs, const std::map<std::string, std::string>& added,
               const ExecLimits& limits, std::vector<std::string>* problems) {
  const std::string path = absl::StrCat("replicas.", rs.role());
  int64_t total = limits.reserve + Cost(0);  // argv's closing null pointer
  for (auto [field, list] : {std::pair{"command", &rs.command()}, std::pair{"args", &rs.args()}}) {
    for (int i = 0; i < list->size(); ++i) {
      total += Cost(list->Get(i).size());
      if (Cost(list->Get(i).size()) - int64_t{sizeof(char*)} > limits.max_string) {
        problems->push_back(absl::StrCat(path, ".", field, "[", i, "]: ", list->Get(i).size(),
                                         " bytes is above the ", limits.max_string,
                                         " bytes the kernel takes in one argument"));
      }
    }
  }
  std::map<std::string, std::string> env(rs.env().begin(), rs.env().end());
  for (const auto& [k, v] : rs.secret_env()) env[k] = v;  // in clear: checked before they are sealed
  for (const auto& [k, v] : added) env[k] = v;  // as the launch sets them: Trainyard's win
  int64_t added_bytes = 0;
  for (const auto& [k, v] : env) {
    int64_t bytes = static_cast<int64_t>(k.size() + 1 + v.size());
    total += bytes + 1 + sizeof(char*);
    bool ours = added.count(k) > 0;
    if (ours) added_bytes += bytes + 1 + sizeof(char*);
    if (bytes + 1 > limits.max_string) {
      problems->push_back(ours ? absl::StrCat(path, ": the variable ", k, " that Trainyard sets would be ", bytes,
                                              " bytes, above the ", limits.max_string,
                                              " bytes the kernel takes in one variable (fewer tasks make it shorter)")
                               : absl::StrCat(path, ".env.", k, ": ", bytes, " bytes is above the ",
                                              limits.max_string, " bytes the kernel takes in one variable"));
    }
  }
  if (total > limits.arg_max) {
    problems->push_back(absl::StrCat(path, ": command, args and environment come to ", total,
                                     " bytes (with ", added_bytes, " of variables Trainyard sets and ",
                                     limits.reserve, " kept for the node's own), above the ", limits.arg_max,
                                     " bytes the kernel will start a program with (ARG_MAX)"));
  }
}

TaskEnvInput StandInInput(const v1::JobSpec& spec, const ExecJob& job) {
  TaskEnvInput in;
  in.spec = &spec;
  in.job = job.name;
  in.checkpoint_dir = job.checkpoint_dir;
  if (job.job_master) in.job_master = "255.255.255.255:65535";
  in.attempt = 999999;
  in.tasks = StandInPlacement(spec);
  return in;
}

// Whether the job is small enough (see kSmallJob) that the spec's own strings
// decide: each within one string's limit, and with kSmallJob.env_bytes more
// under ARG_MAX.
bool FitsWithoutEstimate(const v1::JobSpec& spec, const ExecJob& job, const ExecLimits& limits) {
  if (job.name.size() > kSmallJob.name_bytes || job.checkpoint_dir.size() > kSmallJob.path_bytes) return false;
  int tasks = 0;
  for (const auto& rs : spec.replicas()) {
    tasks += std::max(rs.count(), 0);
    int64_t ports = std::max(rs.resources().port_count(), 0);
    for (const auto& p : rs.resources().ports()) ports += std::max<int64_t>(int64_t{p.end()} - p.begin() + 1, 0);
    if (tasks > kSmallJob.tasks || ports > kSmallJob.ports || rs.role().size() > kSmallJob.name_bytes) return false;
  }
  for (const auto& rs : spec.replicas()) {
    int64_t total = limits.reserve + Cost(0) + kSmallJob.env_bytes;
    auto add = [&](size_t bytes) {
      total += Cost(bytes);
      return Cost(bytes) - int64_t{sizeof(char*)} <= limits.max_string;
    };
    for (const auto& a : rs.command()) if (!add(a.size())) return false;
    for (const auto& a : rs.args()) if (!add(a.size())) return false;
    for (const auto& [k, v] : rs.env()) if (!add(k.size() + 1 + v.size())) return false;
    for (const auto& [k, v] : rs.secret_env()) if (!add(k.size() + 1 + v.size())) return false;
    if (total > limits.arg_max) return false;
  }
  return true;
}

}  // namespace

int64_t TrainyardEnvBytes(const v1::JobSpec& spec, const ExecJob& job) {
  TaskEnvInput in = StandInInput(spec, job);
  JobWideEnv shared = BuildJobWideEnv(in);
  int64_t most = 0;
  for (const PlacedTaskView& self : in.tasks) {
    int64_t bytes = 0;
    for (const auto& [k, v] : BuildTaskEnv(in, shared, self).env) bytes += Cost(k.size() + 1 + v.size());
    most = std::max(most, bytes);
  }
  return most;
}

std::vector<std::string> CheckExecSize(const v1::JobSpec& spec, const ExecJob& job, const ExecLimits& limits) {
  std::vector<std::string> problems;
  if (limits.arg_max <= 0) return problems;
  // Checked at every submission: the full estimate below costs more than
  // the rest of accepting a small job.
  if (FitsWithoutEstimate(spec, job, limits)) return problems;
  TaskEnvInput in = StandInInput(spec, job);
  JobWideEnv shared = BuildJobWideEnv(in);  // once: each role's estimate shares it
  for (const auto& rs : spec.replicas()) {
    if (IsJobMasterRole(rs.role()) || rs.count() < 1) continue;
    // Index 0 stands for the role: its tasks differ only in short numbers.
    auto self = std::find_if(in.tasks.begin(), in.tasks.end(), [&](const PlacedTaskView& t) { return t.role == rs.role(); });
    if (self == in.tasks.end()) continue;
    CheckRole(rs, BuildTaskEnv(in, shared, *self).env, limits, &problems);
  }
  return problems;
}

}  // namespace trainyard::api
