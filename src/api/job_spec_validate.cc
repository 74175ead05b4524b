// Job spec validation: names, counts, resources against the allocation
// limits, what the kernel can exec, framework needs; and putting the
// problems of parsing and of validation into one answer. Every problem names
// the field as the user wrote it (`cpu`, `memory`, `gpuMask`), never the
// internal quantity it became.
#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/image_ref.h"
#include "api/job_spec.h"
#include "api/job_array.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "core/resources/gpu_set.h"
#include "core/resources/port_ranges.h"

namespace trainyard::api {
namespace {

using Errors = std::vector<std::string>;

constexpr size_t kMaxProblemsShown = 100;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

std::string Printable(const std::string& s) {
  for (char c : s) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) return absl::StrCat("\"", absl::CEscape(s), "\"");
  }
  return s;
}

const v1::ReplicaSpec* FindRole(const v1::JobSpec& spec, std::string_view role) {
  for (const auto& r : spec.replicas()) {
    if (r.role() == role) return &r;
  }
  return nullptr;
}

std::string IntText(int64_t v) { return absl::StrCat(v); }

// One quantity (`path`.`field`) against its limits, written back in the
// user's units. The field's name is put together only for a problem: every
// submission passes here.
void CheckQuantity(absl::string_view path, absl::string_view field, int64_t value, int64_t min, int64_t max,
                   std::string (*text)(int64_t), Errors* errors) {
  if (value < 0) {
    errors->push_back(absl::StrCat(path, ".", field, ": ", text(value), " is negative"));
  } else if (value < min) {
    errors->push_back(absl::StrCat(path, ".", field, ": ", text(value), " is below the minimum allocation ", text(min)));
  } else if (value > max) {
    errors->push_back(absl::StrCat(path, ".", field, ": ", text(value), " is above the maximum allocation ", text(max)));
  }
}

// A share of one GPU: 1..999 thousandths, alone (no whole GPUs, no mask);
// GPU memory only with a share; model names not empty.
void ValidateGpuShare(const v1::Resource& r, const std::string& path, Errors* errors) {
  if (r.gpu_milli() < 0 || r.gpu_milli() >= 1000) {
    errors->push_back(absl::StrCat(path, ".gpuMilli: ", r.gpu_milli(),
                                   " must be 1..999 (a share of one GPU); ask whole GPUs with gpus"));
  } else if (r.gpu_milli() > 0 && r.gpus() > 0) {
    errors->push_back(absl::StrCat(path, ".gpuMilli: a share of one GPU cannot go with gpus: ", r.gpus()));
  } else if (r.gpu_milli() > 0 && r.gpu_mask() != 0) {
    errors->push_back(absl::StrCat(path, ".gpuMask: a share of one GPU cannot name GPUs"));
  }
  if (r.gpu_memory_mb() < 0) {
    errors->push_back(absl::StrCat(path, ".gpuMemory: ", r.gpu_memory_mb(), " is negative"));
  } else if (r.gpu_memory_mb() > 0 && r.gpu_milli() == 0) {
    errors->push_back(absl::StrCat(path, ".gpuMemory: goes only with a share of one GPU (gpus below 1, "
                                   "or gpuMilli)"));
  }
  for (int i = 0; i < r.gpu_models_size(); ++i) {
    if (r.gpu_models(i).empty()) {
      errors->push_back(absl::StrCat(path, ".gpuModel[", i, "]: must not be empty"));
    }
  }
}

// A quantity that is set (0 means "none asked") but below what a task can
// run with: every launch of it would fail, so it is refused here instead.
void CheckRunnable(absl::string_view path, absl::string_view field, int64_t value, int64_t least,
                   std::string (*text)(int64_t), absl::string_view why, Errors* errors) {
  if (value > 0 && value < least) {
    errors->push_back(absl::StrCat(path, ".", field, ": ", text(value), " is below ", text(least), ", the least ", why));
  }
}

void ValidateResources(const v1::Resource& r, const std::string& path, const core::AllocationLimits& limits,
                       Errors* errors) {
  size_t before = errors->size();
  CheckQuantity(path, "cpu", r.vcores_milli(), limits.min_vcores_milli, limits.max_vcores_milli, &CpuQuantityText,
                errors);
  if (errors->size() == before) {
    CheckRunnable(path, "cpu", r.vcores_milli(), kMinRunnableVcoresMilli, &CpuQuantityText,
                  "CPU a task can run with (the kernel takes no CPU quota below 1 ms per 100 ms period)", errors);
  }
  before = errors->size();
  CheckQuantity(path, "memory", r.memory_mb(), limits.min_memory_mb, limits.max_memory_mb, &MemoryQuantityText, errors);
  if (errors->size() == before) {
    CheckRunnable(path, "memory", r.memory_mb(), kMinRunnableMemoryMb, &MemoryQuantityText,
                  "memory a task can start in (a program and its C library need more to be loaded)", errors);
  }
  CheckQuantity(path, "gpus", r.gpus(), limits.min_gpus, limits.max_gpus, &IntText, errors);
  const int mask_gpus = __builtin_popcountll(r.gpu_mask());
  if (r.gpu_mask() != 0 && r.gpus() != mask_gpus) {
    errors->push_back(absl::StrCat(path, ".gpus: ", r.gpus(), " does not match gpuMask ",
                                   core::GpuSet(r.gpu_mask()).ToString(), " (", mask_gpus, " GPUs)"));
  }
  ValidateGpuShare(r, path, errors);
  int64_t ports = r.port_count();
  for (const auto& p : r.ports()) {
    if (p.begin() < core::kMinPort || p.end() > core::kMaxPort || p.begin() > p.end()) {
      errors->push_back(absl::StrCat(path, ".ports: ", p.begin(), "-", p.end(), " is not a range inside 1-65535"));
    } else {
      ports += int64_t{p.end()} - p.begin() + 1;
    }
  }
  if (r.port_count() < 0) {
    errors->push_back(absl::StrCat(path, ".ports: ", r.port_count(), " is negative"));
  } else if (ports > limits.max_ports) {
    errors->push_back(absl::StrCat(path, ".ports: ", ports, " is above the maximum allocation ", limits.max_ports));
  }
}

// What execve would silently cut or misread: a NUL ends a C string, and
// "A=B=C" in the environment is the variable A, so a name holding '=' (or an
// empty one) would set or override another variable.
void ValidateExecStrings(const v1::ReplicaSpec& r, const std::string& path, Errors* errors) {
  for (auto [field, list] : {std::pair{"command", &r.command()}, std::pair{"args", &r.args()}}) {
    for (int i = 0; i < list->size(); ++i) {
      if (absl::StrContains(list->Get(i), '\0')) {
        errors->push_back(absl::StrCat(path, ".", field, "[", i, "]: contains a NUL byte"));
      }
    }
  }
  std::vector<std::string> names;
  for (const auto& [k, v] : r.env()) names.push_back(k);
  for (const auto& [k, v] : r.secret_env()) {
    if (r.env().count(k)) errors->push_back(absl::StrCat(path, ".env.", Printable(k), ": given both plain and secret"));
    if (absl::StartsWith(k, "TRAINYARD_")) {
      errors->push_back(absl::StrCat(path, ".env.", Printable(k), ": TRAINYARD_ variables are set by Trainyard, not secret"));
    }
    names.push_back(k);
  }
  std::sort(names.begin(), names.end());  // a protobuf map's order is not stable
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& k : names) {
    auto at = [&] { return absl::StrCat(path, ".env.", Printable(k)); };  // only for a problem
    if (k.empty()) {
      errors->push_back(absl::StrCat(path, ".env: a variable name must not be empty"));
    } else if (absl::StrContains(k, '\0')) {
      errors->push_back(absl::StrCat(at(), ": the name contains a NUL byte"));
    } else if (absl::StrContains(k, '=')) {
      errors->push_back(absl::StrCat(at(), ": a variable name must not contain '='"));
    }
    auto plain = r.env().find(k);
    const std::string& value = plain != r.env().end() ? plain->second : r.secret_env().at(k);
    if (absl::StrContains(value, '\0')) errors->push_back(absl::StrCat(at(), ": the value contains a NUL byte"));
  }
  if (absl::StrContains(r.working_dir(), '\0')) errors->push_back(absl::StrCat(path, ".workingDir: contains a NUL byte"));
}

void ValidateFramework(const v1::JobSpec& spec, Errors* errors) {
  switch (spec.framework()) {
    case v1::FRAMEWORK_TENSORFLOW:
      if (!FindRole(spec, "worker") && !FindRole(spec, "chief")) {
        errors->push_back("framework: tensorflow needs a 'worker' or 'chief' role in replicas");
      }
      break;
    case v1::FRAMEWORK_PYTORCH: {
      const v1::ReplicaSpec* master = FindRole(spec, "master");
      if (master && master->count() != 1) {
        errors->push_back(absl::StrCat("replicas.master.count: pytorch needs exactly one master rank, got ",
                                       master->count()));
      }
      if (!master && !FindRole(spec, "worker")) {
        errors->push_back("framework: pytorch needs a 'master' role of count 1 or a 'worker' role");
      }
      break;
    }
    case v1::FRAMEWORK_MPI:
      if (!FindRole(spec, "worker") && !FindRole(spec, "launcher")) {
        errors->push_back("framework: mpi needs a 'worker' role in replicas");
      }
      break;
    default:
      break;
  }
  if (spec.success_policy() == v1::SUCCESS_CHIEF && !FindRole(spec, "chief") && !FindRole(spec, "master")) {
    errors->push_back("successPolicy: Chief needs a 'chief' (or 'master') role in replicas");
  }
}

// `image:` and `volumes:` (docs/images.md).
void ValidateImage(const v1::ReplicaSpec& r, const std::string& path, Errors* errors) {
  if (!r.image().empty()) {
    if (absl::StatusOr<ImageRef> ref = ParseImageRef(r.image()); !ref.ok()) {
      errors->push_back(absl::StrCat(path, ".image: ", ref.status().message()));
    }
  }
  if (r.volumes_size() > 0 && r.image().empty()) {
    errors->push_back(absl::StrCat(path, ".volumes: needs an image (a task without one sees the node's files as they are)"));
  }
  if (r.volumes_size() > kMaxVolumes) {
    errors->push_back(absl::StrCat(path, ".volumes: ", r.volumes_size(), " are more than ", kMaxVolumes));
  }
  std::set<std::string> seen;
  for (int i = 0; i < r.volumes_size() && i < kMaxVolumes; ++i) {
    const v1::Volume& v = r.volumes(i);
    std::string at = absl::StrCat(path, ".volumes[", i, "]");
    if (std::string why = VolumeProblem(v); !why.empty()) {
      errors->push_back(absl::StrCat(at, ".", why));
    } else if (!seen.insert(v.path()).second) {
      errors->push_back(absl::StrCat(at, ".path: ", v.path(), " is mounted twice"));
    }
  }
}

// An elastic job (a role with minCount, docs/elastic.md) restarts whole at
// each size: no role of it may join a fixed gang later (minAvailable), and
// its master must be a task of it, started with the workers of each size.
void ValidateElastic(const v1::JobSpec& spec, Errors* errors) {
  std::string elastic;
  for (const auto& r : spec.replicas()) {
    if (r.min_count() > 0 && elastic.empty()) elastic = r.role();
  }
  if (elastic.empty()) return;
  for (const auto& r : spec.replicas()) {
    if (r.min_count() == 0 && r.min_available() > 0) {
      errors->push_back(absl::StrCat("replicas.", Printable(r.role()), ".minAvailable: role ", Printable(elastic),
                                     " is elastic (minCount), and an elastic job restarts whole at each size; "
                                     "no role of it joins later (leave minAvailable out)"));
    }
  }
  if (!spec.job_master_address().empty()) {
    errors->push_back(absl::StrCat("replicas.", Printable(elastic), ".minCount: an elastic job's master runs as a "
                                   "task of the job, started at each size with the workers of that size; not in "
                                   "the submitting client (submit --jobmaster-in-client)"));
  }
}

void ValidateReplica(const v1::ReplicaSpec& r, const core::AllocationLimits& limits, Errors* errors) {
  std::string path = absl::StrCat("replicas.", Printable(r.role()));
  if (!ValidName(r.role())) {
    errors->push_back(absl::StrCat(path, ": role name must be 1-63 characters of a-z, 0-9 and '-'"));
  }
  if (r.count() < 1 || r.count() > 10000) {
    errors->push_back(absl::StrCat(path, ".count: ", r.count(), " must be between 1 and 10000"));
  }
  if (r.min_available() < 0 || r.min_available() > r.count()) {
    errors->push_back(absl::StrCat(path, ".minAvailable: ", r.min_available(), " must be between 1 and count ",
                                   r.count()));
  }
  if (r.min_count() < 0 || r.min_count() > r.count()) {
    errors->push_back(absl::StrCat(path, ".minCount: ", r.min_count(), " must be between 1 and count ", r.count()));
  }
  if (r.min_count() > 0 && r.min_available() > 0) {
    errors->push_back(absl::StrCat(path, ".minCount: an elastic role (minCount) restarts at each new size; ",
                                   "minAvailable (tasks joining a fixed gang later) cannot be given with it"));
  }
  if (r.max_restarts() < 0) {
    errors->push_back(absl::StrCat(path, ".maxRestarts: ", r.max_restarts(), " must not be negative"));
  }
  const v1::RestartBudgets& b = r.restart_budgets();
  for (auto [name, has, n] : {std::tuple{"oom", b.has_oom(), b.oom()},
                              std::tuple{"nodeLost", b.has_node_lost(), b.node_lost()},
                              std::tuple{"gpuError", b.has_gpu_error(), b.gpu_error()},
                              std::tuple{"preemption", b.has_preemption(), b.preemption()}}) {
    if (has && n < kUnlimitedRestarts) {
      errors->push_back(absl::StrCat(path, ".restartBudgets.", name, ": ", n,
                                     " must be a number of restarts (0 or more) or unlimited (-1)"));
    }
  }
  // With an image, its entrypoint and cmd are the command when none is given.
  if (r.command().empty() && r.image().empty()) {
    errors->push_back(absl::StrCat(path, ".command: required (or an image whose entrypoint runs)"));
  }
  ValidateImage(r, path, errors);
  if (r.kind() == v1::ROLE_KIND_SERVICE && IsFrameworkRoleName(r.role())) {
    errors->push_back(absl::StrCat(path, ".kind: a service needs a role name of its own ('", r.role(),
                                   "' is a framework's role: a worker, rank or master to it)"));
  }
  if (r.kind() != v1::ROLE_KIND_TASK && r.kind() != v1::ROLE_KIND_SERVICE) {
    errors->push_back(absl::StrCat(path, ".kind: ", static_cast<int>(r.kind()), " is not task or service"));
  }
  ValidateExecStrings(r, path, errors);
  ValidateResources(r.resources(), path + ".resources", limits, errors);
}

int64_t StringBytes(const google::protobuf::RepeatedPtrField<std::string>& list) {
  int64_t n = 0;
  for (const std::string& s : list) n += static_cast<int64_t>(s.size());
  return n;
}

int64_t EnvBytes(const v1::ReplicaSpec& r) {
  int64_t n = 0;
  for (const auto& [k, v] : r.env()) n += static_cast<int64_t>(k.size() + v.size());
  for (const auto& [k, v] : r.secret_env()) n += static_cast<int64_t>(k.size() + v.size());
  return n;
}

// "... is above the 100 roles this server takes in one job (maxRolesPerJob
// in its config)".
std::string Above(int64_t limit, absl::string_view unit, absl::string_view per, absl::string_view key) {
  return absl::StrCat(" is above the ", limit, " ", unit, " this server takes ", per, " (", key, " in its config)");
}

// The field a "path: problem" line is about.
std::string PathOf(const std::string& problem) {
  return problem.substr(0, problem.find(": "));
}

// Dependencies name jobs; an array's elements are named NAME-INDEX, which
// must be names too.
void ValidateArrayAndDependencies(const v1::JobSpec& spec, Errors* errors) {
  for (auto [key, list] : {std::pair{"afterOk", &spec.dependencies().after_ok()},
                           std::pair{"afterAny", &spec.dependencies().after_any()}}) {
    for (int i = 0; i < list->size(); ++i) {
      if (!ValidName(list->Get(i))) {
        errors->push_back(absl::StrCat("dependencies.", key, "[", i, "]: '", Printable(list->Get(i)),
                                       "' is not a job name (a-z, 0-9 and '-')"));
      }
    }
  }
  if (spec.array().empty()) return;
  absl::StatusOr<ArrayRange> range = ParseArrayRange(spec.array());
  if (!range.ok()) {
    errors->push_back(std::string(range.status().message()));
    return;
  }
  std::string last = ArrayElementName(spec.name(), range->indices.back());
  if (ValidName(spec.name()) && !ValidName(last)) {
    errors->push_back(absl::StrCat("name: its array's element names (", last, ") would be longer than 63 characters"));
  }
}

}  // namespace

std::vector<std::string> ValidateJobSpec(const v1::JobSpec& spec, const core::AllocationLimits& limits) {
  Errors errors;
  if (spec.name().empty()) {
    errors.push_back("name: required (1-63 characters of a-z, 0-9 and '-')");
  } else if (!ValidName(spec.name())) {
    errors.push_back(absl::StrCat("name: '", Printable(spec.name()),
                                  "' must be 1-63 characters of a-z, 0-9 and '-', not starting or "
                                  "ending with '-'"));
  }
  if (spec.replicas().empty()) errors.push_back("replicas: at least one role is needed");
  std::set<std::string> roles;
  for (const auto& r : spec.replicas()) {
    // YAML cannot repeat a key (the parser refuses it), a JobSpec sent as
    // protobuf can: its tasks' names would collide.
    if (!roles.insert(r.role()).second) {
      errors.push_back(absl::StrCat("replicas.", Printable(r.role()), ": the role is given twice"));
    }
    ValidateReplica(r, limits, &errors);
  }
  ValidateFramework(spec, &errors);
  // The YAML parser refuses these; a JobSpec built elsewhere may hold one.
  if (spec.active_deadline_ms() < 0) {
    errors.push_back(absl::StrCat("activeDeadline: ", spec.active_deadline_ms(), "ms is not a positive duration"));
  }
  if (spec.jobmaster() && spec.framework() == v1::FRAMEWORK_MPI) {
    errors.push_back("jobmaster: true is not for framework mpi: mpirun starts its ranks inside the workers' rank "
                     "hosts, so they cannot register with a master as workers of their own");
  }
  if (spec.has_jobmaster() && !spec.jobmaster() && !spec.job_master_address().empty()) {
    errors.push_back("jobmaster: false asks for no job master, but the job's master runs in the submitting client "
                     "(submit --jobmaster-in-client): drop one of the two");
  }
  ValidateElastic(spec, &errors);
  ValidateArrayAndDependencies(spec, &errors);
  return errors;
}

std::vector<std::string> CheckSpecBounds(const v1::JobSpec& spec, const SpecBounds& bounds) {
  Errors errors;
  if (spec.replicas_size() > bounds.max_roles) {
    errors.push_back(absl::StrCat("replicas: ", spec.replicas_size(), " roles",
                                  Above(bounds.max_roles, "roles", "in one job", "maxRolesPerJob")));
    return errors;  // one line, not one per role: the roles are what is too many
  }
  int64_t tasks = 0, launch_bytes = 0;
  for (const v1::ReplicaSpec& r : spec.replicas()) {
    const std::string path = absl::StrCat("replicas.", Printable(r.role()));
    int64_t count = std::max<int64_t>(r.count(), 0);
    tasks += count;
    int64_t env = EnvBytes(r), command = StringBytes(r.command()) + StringBytes(r.args());
    if (env > bounds.max_env_bytes) {
      errors.push_back(absl::StrCat(path, ".env: ", env, " bytes",
                                    Above(bounds.max_env_bytes, "bytes", "per role", "maxEnvBytesPerRole")));
    }
    if (command > bounds.max_command_bytes) {
      errors.push_back(absl::StrCat(path, ".command: ", command, " bytes with args",
                                    Above(bounds.max_command_bytes, "bytes", "per role", "maxCommandBytesPerRole")));
    }
    launch_bytes += count * (env + command);
  }
  if (tasks > bounds.max_tasks) {
    errors.push_back(absl::StrCat("replicas: ", tasks, " tasks in all (the sum of the roles' counts)",
                                  Above(bounds.max_tasks, "tasks", "in one job", "maxTasksPerJob")));
  } else if (launch_bytes > bounds.max_launch_bytes) {
    errors.push_back(absl::StrCat("replicas: ", launch_bytes, " bytes of command, args and env over the job's ", tasks,
                                  " tasks", Above(bounds.max_launch_bytes, "bytes", "in one job", "maxLaunchBytesPerJob"),
                                  "; fewer tasks or a smaller environment fit"));
  }
  return errors;
}

std::vector<std::string> MergeProblems(std::vector<std::string> parse, const std::vector<std::string>& validate) {
  // The parse problems' fields in a sorted set, so each validation problem
  // is looked up by its own prefixes: a spec with thousands of problems of
  // each kind cost their product (seconds under the server's lock).
  std::set<std::string> parsed;
  for (const std::string& p : parse) parsed.insert(PathOf(p));
  auto covered = [&](const std::string& v) {
    if (parsed.count("spec") || parsed.count(v)) return true;
    for (size_t i = 0; i < v.size(); ++i) {  // a field v is inside: "a" for "a.b" or "a[0]"
      if ((v[i] == '.' || v[i] == '[') && parsed.count(v.substr(0, i))) return true;
    }
    // An element of the list v: "a[3]" for "a".
    auto it = parsed.lower_bound(v + "[");
    return it != parsed.end() && absl::StartsWith(*it, v + "[");
  };
  for (const std::string& v : validate) {
    if (!covered(PathOf(v))) parse.push_back(v);
  }
  return parse;
}

absl::Status ProblemsStatus(const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  if (problems.size() <= kMaxProblemsShown) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  std::vector<std::string> shown(problems.begin(), problems.begin() + kMaxProblemsShown);
  shown.push_back(absl::StrCat("... and ", problems.size() - kMaxProblemsShown, " more problems"));
  return absl::InvalidArgumentError(absl::StrJoin(shown, "\n"));
}

core::AllocationLimits UnboundedLimits() {
  core::AllocationLimits l;
  l.max_memory_mb = std::numeric_limits<int64_t>::max();
  l.max_vcores_milli = std::numeric_limits<int64_t>::max();
  l.max_gpus = 64;  // the most a node can have
  l.max_ports = core::kMaxPort;
  return l;
}

absl::StatusOr<v1::JobSpec> LoadJobSpec(std::string_view yaml, const core::AllocationLimits& limits) {
  v1::JobSpec spec;
  std::vector<std::string> problems = ParseJobSpecYamlInto(yaml, &spec);
  if (spec.user().empty()) spec.set_user("default");
  if (spec.queue().empty()) spec.set_queue("default");
  problems = MergeProblems(std::move(problems), ValidateJobSpec(spec, limits));
  if (!problems.empty()) return ProblemsStatus(problems);
  return spec;
}

std::string FrameworkName(v1::Framework f) {
  switch (f) {
    case v1::FRAMEWORK_TENSORFLOW: return "tensorflow";
    case v1::FRAMEWORK_PYTORCH: return "pytorch";
    case v1::FRAMEWORK_MPI: return "mpi";
    default: return "none";
  }
}

std::string PriorityName(v1::PriorityClass p) {
  switch (p) {
    case v1::PRIORITY_PRODUCTION: return "production";
    case v1::PRIORITY_PTR: return "ptr";
    default: return "iteration";
  }
}

std::string RestartPolicyName(v1::RestartPolicy p) {
  switch (p) {
    case v1::RESTART_ON_FAILURE: return "OnFailure";
    case v1::RESTART_ALWAYS: return "Always";
    default: return "Never";
  }
}

}  // namespace trainyard::api
