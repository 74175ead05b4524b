// The job spec: parsing the YAML a user writes (Kubeflow-like, see
// docs/job-spec.md) into a JobSpec, and validating it. Every problem is
// reported with the field path the user wrote, e.g.
// "replicas.worker.resources.gpus: 9 is above the maximum allocation 8",
// and all of them at once, one "path: problem" per line; nothing is accepted
// when there is any.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/spec_bounds.h"
#include "core/resources/limits.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// Parses a CPU quantity: "2", "1.5", "500m". Returns milli-cores.
absl::StatusOr<int64_t> ParseCpuQuantity(std::string_view text);
// Parses a memory quantity: "1024" (MiB), "512Mi", "4Gi", "1Ti", "2G",
// "1500M", "64Ki". Returns MiB, rounded up.
absl::StatusOr<int64_t> ParseMemoryQuantity(std::string_view text);
// The forms a user writes back: 1500 -> "1500m", 2000 -> "2"; 4096 -> "4Gi",
// 1536 -> "1536Mi".
std::string CpuQuantityText(int64_t milli);
std::string MemoryQuantityText(int64_t mb);

// Parses as much of the YAML text of a job spec as it can into *spec and
// returns every problem found: unknown fields, wrong types (a command that is
// a string, not a list), malformed values, duplicate keys, keys that are not
// strings, text that is not YAML. Never throws: whatever the YAML parser
// raises becomes a problem. Empty when the text parsed cleanly.
std::vector<std::string> ParseJobSpecYamlInto(std::string_view yaml, v1::JobSpec* spec);

// ParseJobSpecYamlInto as one InvalidArgument listing every problem.
absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(std::string_view yaml);

// Checks a spec against the rules a scheduler needs: a name of
// [a-z0-9-], at least one replica role, counts >= 1, resources inside
// `limits` and not below what a task can run with (kMinRunnable*), gpu
// masks that agree with the GPU count, commands, args and env
// the kernel can exec (no NUL bytes; variable names neither empty nor
// holding '='), framework needs (tensorflow: a worker or chief role;
// pytorch: a "master" role of count 1 or a "worker" role; mpi: a worker
// role). Returns every problem found, empty when the spec is valid.
std::vector<std::string> ValidateJobSpec(const v1::JobSpec& spec,
                                         const core::AllocationLimits& limits);

// The problems of `spec` against `bounds`, each naming the field, the
// value, the bound and its config key, e.g. "replicas: 5000 roles is above
// the 100 roles this server takes in one job (maxRolesPerJob in its
// config)". Linear in the spec; empty when it is within them.
std::vector<std::string> CheckSpecBounds(const v1::JobSpec& spec, const SpecBounds& bounds);

// The problems of parsing and of validating the partly parsed spec, in one
// list: a validation problem about a field that already failed to parse
// (the same path, a field inside it, or an element of a list it names) is
// left out, so "command: required" does not follow "command: must be a list".
std::vector<std::string> MergeProblems(std::vector<std::string> parse,
                                       const std::vector<std::string>& validate);

// One InvalidArgument with the problems, one per line; past the first 100 a
// last line says how many more there are. OK when `problems` is empty.
absl::Status ProblemsStatus(const std::vector<std::string>& problems);

// Limits that refuse nothing a node could hold: what a client checks with,
// the server's own limits being unknown there.
core::AllocationLimits UnboundedLimits();

// Parses, defaults user and queue to "default", validates: one
// InvalidArgument listing every problem of both.
absl::StatusOr<v1::JobSpec> LoadJobSpec(std::string_view yaml,
                                        const core::AllocationLimits& limits);

// Lower-case names used in specs and output: "tensorflow", "production",
// "OnFailure", ...
std::string FrameworkName(v1::Framework f);
std::string PriorityName(v1::PriorityClass p);
std::string RestartPolicyName(v1::RestartPolicy p);

}  // namespace trainyard::api
