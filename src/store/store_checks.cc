// Batch validation and record-level consistency checks shared by the SQLite
// store and the in-memory fake.
#include "api/states.h"
#include "store/store_checks.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/state_store.h"

namespace trainyard::store_checks {
namespace {

absl::Status ValidateJobCommon(const v1::JobRecord& job, const char* op) {
  if (job.id() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": job.id is 0; job ids start at 1"));
  }
  if (job.name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": job ", job.id(), " has an empty name"));
  }
  std::set<std::pair<std::string, int>> seen;
  for (const v1::TaskRecord& task : job.tasks()) {
    if (absl::Status s = ValidateTask(job.id(), task); !s.ok()) return s;
    if (!seen.emplace(task.role(), task.index()).second) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": job ", job.id(), " lists task ",
                                                     task.role(), "/", task.index(), " twice"));
    }
  }
  return absl::OkStatus();
}

std::string TaskName(uint64_t job_id, const v1::TaskRecord& task) {
  return absl::StrCat("job ", job_id, " ", task.role(), "/", task.index());
}

struct PortUse {
  uint32_t begin;
  uint32_t end;
  std::string task;
};

void CheckGpus(const std::string& node, std::map<int, std::string>& holders, uint64_t mask,
               const std::string& task, std::vector<std::string>& problems) {
  for (int gpu = 0; gpu < 64; ++gpu) {
    if ((mask >> gpu & 1) == 0) continue;
    auto [it, inserted] = holders.emplace(gpu, task);
    if (!inserted) {
      problems.push_back(
          absl::StrCat("node ", node, ": GPU ", gpu, " held by ", it->second, " and ", task));
    }
  }
}

void CheckPorts(const std::string& node, std::vector<PortUse>& uses,
                std::vector<std::string>& problems) {
  std::sort(uses.begin(), uses.end(),
            [](const PortUse& a, const PortUse& b) { return a.begin < b.begin; });
  size_t far = 0;  // the earlier range that reaches furthest
  for (size_t i = 1; i < uses.size(); ++i) {
    if (uses[i].begin <= uses[far].end && uses[i].task != uses[far].task) {
      problems.push_back(absl::StrCat("node ", node, ": ports ", uses[i].begin, "-",
                                      std::min(uses[i].end, uses[far].end), " held by ",
                                      uses[far].task, " and ", uses[i].task));
    }
    if (uses[i].end > uses[far].end) far = i;
  }
}

}  // namespace

absl::Status ValidateNewJob(const v1::JobRecord& job) {
  return ValidateJobCommon(job, "create job");
}

absl::Status ValidateUpdatedJob(const v1::JobRecord& job) {
  return ValidateJobCommon(job, "update job");
}

absl::Status ValidateTask(uint64_t job_id, const v1::TaskRecord& task) {
  if (task.role().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": task.role is empty (task index ", task.index(), ")"));
  }
  if (task.index() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, ": task ", task.role(),
                                                   " has index ", task.index(), "; must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNode(const v1::NodeRecord& node) {
  if (node.info().name().empty()) {
    return absl::InvalidArgumentError("put node: node.info.name is empty");
  }
  return absl::OkStatus();
}

absl::Status JobNotFound(uint64_t job_id, const char* op) {
  return absl::NotFoundError(absl::StrCat(op, ": job ", job_id, " does not exist"));
}

bool TaskIsLive(v1::JobState job_state, const v1::TaskRecord& task) {
  return !task.node().empty() && !api::IsTerminal(task.state()) &&
         !api::IsTerminal(job_state);
}

std::vector<std::string> FindAllocationConflicts(const std::vector<v1::JobRecord>& jobs) {
  std::map<std::string, std::map<int, std::string>> gpus;
  std::map<std::string, std::vector<PortUse>> ports;
  std::vector<std::string> problems;
  for (const v1::JobRecord& job : jobs) {
    for (const v1::TaskRecord& task : job.tasks()) {
      if (!TaskIsLive(job.state(), task)) continue;
      std::string name = TaskName(job.id(), task);
      CheckGpus(task.node(), gpus[task.node()], task.allocation().gpu_mask(), name, problems);
      for (const v1::PortRange& range : task.allocation().ports()) {
        ports[task.node()].push_back({range.begin(), range.end(), name});
      }
    }
  }
  for (auto& [node, uses] : ports) CheckPorts(node, uses, problems);
  return problems;
}

absl::Status ProblemsToStatus(const std::string& what, const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  constexpr size_t kMaxShown = 20;
  std::vector<std::string> shown(problems.begin(),
                                 problems.begin() + std::min(problems.size(), kMaxShown));
  std::string more = problems.size() > kMaxShown
                         ? absl::StrCat("; and ", problems.size() - kMaxShown, " more")
                         : "";
  return absl::DataLossError(
      absl::StrCat(what, ": ", problems.size(), " problem(s): ", absl::StrJoin(shown, "; "), more));
}

}  // namespace trainyard::store_checks
