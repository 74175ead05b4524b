// The job spec: parsing the YAML a user writes (Kubeflow-like, see
// docs/job-spec.md) into a JobSpec, and validating it. Every problem is
// reported with its field path, e.g.
// "replicas.worker.resources.gpus: 9 is above the maximum allocation 8";
// nothing is accepted when there is any.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/limits.h"
#include "proto/trainyard.pb.h"

namespace trainyard::api {

// Parses a CPU quantity: "2", "1.5", "500m". Returns milli-cores.
absl::StatusOr<int64_t> ParseCpuQuantity(std::string_view text);
// Parses a memory quantity: "1024" (MiB), "512Mi", "4Gi", "1Ti", "2G",
// "1500M", "64Ki". Returns MiB, rounded up.
absl::StatusOr<int64_t> ParseMemoryQuantity(std::string_view text);

// Parses the YAML text of a job spec. Unknown fields, wrong types and
// malformed values are errors; all of them are collected into one
// InvalidArgument status, one "path: problem" per line.
absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(std::string_view yaml);

// Checks a spec against the rules a scheduler needs: a name of
// [a-z0-9-], at least one replica role, counts >= 1, resources inside
// `limits`, gpu masks that agree with the GPU count, framework needs
// (tensorflow: a worker or chief role; pytorch: a "master" role of count 1
// or a "worker" role; mpi: a worker role). Returns every problem found,
// empty when the spec is valid.
std::vector<std::string> ValidateJobSpec(const v1::JobSpec& spec,
                                         const core::AllocationLimits& limits);

// ParseJobSpecYaml then ValidateJobSpec; one InvalidArgument listing every
// problem.
absl::StatusOr<v1::JobSpec> LoadJobSpec(std::string_view yaml,
                                        const core::AllocationLimits& limits);

// Lower-case names used in specs and output: "tensorflow", "production",
// "OnFailure", ...
std::string FrameworkName(v1::Framework f);
std::string PriorityName(v1::PriorityClass p);
std::string RestartPolicyName(v1::RestartPolicy p);

}  // namespace trainyard::api
