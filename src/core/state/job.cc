// Priority class names, job validation and demand totals.
#include "core/state/job.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {

const char* PriorityClassName(PriorityClass p) {
  switch (p) {
    case PriorityClass::kPtr:
      return "ptr";
    case PriorityClass::kIteration:
      return "iteration";
    case PriorityClass::kProduction:
      return "production";
  }
  return "unknown";
}

absl::StatusOr<PriorityClass> ParsePriorityClass(std::string_view name) {
  if (name == "ptr") return PriorityClass::kPtr;
  if (name == "iteration" || name.empty()) return PriorityClass::kIteration;
  if (name == "production") return PriorityClass::kProduction;
  return absl::InvalidArgumentError(absl::StrCat(
      "priority class \"", std::string(name), "\" is unknown; use production, iteration or ptr"));
}

namespace {

absl::Status ValidateRole(const JobRequest& job, const RoleRequest& role) {
  auto err = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job.id, " role ", role.name, ": ", what));
  };
  if (role.name.empty()) return err("name is empty");
  if (role.count < 1) return err(absl::StrCat("count ", role.count, " must be at least 1"));
  if (role.min_available > role.count) {
    return err(absl::StrCat("min_available ", role.min_available, " is above count ",
                            role.count));
  }
  const Resource& r = role.resource;
  if (r.memory_mb < 0 || r.vcores_milli < 0 || r.gpus < 0 || r.port_count < 0) {
    return err(absl::StrCat("negative resource in request ", r.ToString()));
  }
  if (r.gpu_mask != 0 && __builtin_popcountll(r.gpu_mask) != r.gpus) {
    return err(absl::StrCat("gpus ", r.gpus, " does not match the GPU mask ",
                            GpuSet(r.gpu_mask).ToString()));
  }
  if (r.gpus > kMaxGpus) return err(absl::StrCat("gpus ", r.gpus, " is above ", kMaxGpus));
  if (r.gpu_milli < 0 || r.gpu_milli >= 1000) {
    return err(absl::StrCat("gpu_milli ", r.gpu_milli,
                            " must be 1..999 (a share of one GPU); ask whole GPUs with gpus"));
  }
  if (r.gpu_milli > 0 && (r.gpus != 0 || r.gpu_mask != 0)) {
    return err(absl::StrCat("gpu_milli ", r.gpu_milli, " is a share of one GPU; it cannot go with gpus ",
                            r.gpus, r.gpu_mask != 0 ? " or a GPU mask" : ""));
  }
  if (r.gpu_memory_mb < 0) return err(absl::StrCat("gpu_memory_mb ", r.gpu_memory_mb, " is negative"));
  if (r.gpu_memory_mb > 0 && r.gpu_milli == 0) {
    return err("gpu_memory_mb is set without a GPU share (gpu_milli)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJob(const JobRequest& job) {
  if (job.id.empty()) return absl::InvalidArgumentError("job id is empty");
  if (job.roles.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, ": no roles"));
  }
  absl::flat_hash_set<std::string> names;
  for (const RoleRequest& role : job.roles) {
    if (absl::Status s = ValidateRole(job, role); !s.ok()) return s;
    if (!names.insert(role.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", job.id, ": role name ", role.name, " is used twice"));
    }
  }
  return absl::OkStatus();
}

Resource JobDemand(const JobRequest& job) {
  Resource total;
  for (const RoleRequest& role : job.roles) {
    total.memory_mb += role.resource.memory_mb * role.count;
    total.vcores_milli += role.resource.vcores_milli * role.count;
    total.gpus += role.resource.gpus * role.count;
  }
  return total;
}

int64_t JobGpus(const JobRequest& job) {
  int64_t gpus = 0;
  for (const RoleRequest& role : job.roles) gpus += int64_t{role.resource.gpus} * role.count;
  return gpus;
}

}  // namespace trainyard::core
