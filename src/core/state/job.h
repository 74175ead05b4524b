// The scheduler's view of a job: who asked, in which queue, at which
// priority, and the replica roles (each a gang of identical tasks) with
// their resource request and node constraints. Values only; the scheduler
// copies what it keeps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/resources/resource.h"
#include "core/state/labels.h"

namespace trainyard::core {

// Priority classes, higher value = more important. A job may only preempt
// jobs of a strictly lower class.
enum class PriorityClass : int8_t { kPtr = 0, kIteration = 1, kProduction = 2 };

// "ptr", "iteration", "production".
const char* PriorityClassName(PriorityClass p);
// Parses the names above; the error lists them.
absl::StatusOr<PriorityClass> ParsePriorityClass(std::string_view name);

// One replica role of a job, e.g. 8 "worker" tasks of 4 GPUs each.
struct RoleRequest {
  std::string name;       // "worker", "ps", "chief"...; unique within the job
  int32_t count = 1;      // tasks wanted, >= 1
  // Gang minimum for this role: the job starts only when at least this
  // many of its tasks are placed (together with every other role's
  // minimum). -1 means `count` (all of them).
  int32_t min_available = -1;
  Resource resource;      // per task: memory, vcores, gpus / gpu_mask, ports
  LabelSelector node_selector;  // hard: nodes whose labels match
  std::string node_name;  // wanted node; "" = any
  std::string rack;       // required rack; "" = any
  // When node_name is set and that node cannot serve a task, another node
  // (in `rack` if set) may: locality relaxed at node level only. The GPU
  // mask is never relaxed: another node must have the same indices free.
  bool relax = false;
  // GPU models a task may run on ("V100M32", "A10"); empty = any. A node
  // whose model is unknown serves only roles that name none.
  std::vector<std::string> gpu_models;

  int32_t MinAvailable() const { return min_available < 0 ? count : min_available; }
};

// A job as submitted.
struct JobRequest {
  std::string id;    // unique among the jobs the scheduler knows
  std::string name;
  std::string user;
  std::string queue = "default";  // a leaf queue
  PriorityClass priority = PriorityClass::kIteration;
  std::vector<RoleRequest> roles;
  absl::Time submit_time = absl::UnixEpoch();
  // The job coordinates its checkpoints (it has a job master that can ask
  // its workers to save on demand), so a preemption costs it little work:
  // among equally few victims, such jobs are chosen first.
  bool checkpoints = false;
  // A preemption now would end the job (its preemption budget is spent):
  // it is chosen as a victim only where no other choice frees the room.
  bool last_preemption = false;
  // A role of the job is elastic (minCount, docs/elastic.md): preempted, it
  // is placed again with what is left, so among equally many victims that
  // checkpoint alike such jobs are chosen first.
  bool elastic = false;
};

// OK when the job is well formed: non-empty id, at least one role, counts
// >= 1, 0 <= min_available <= count, non-negative resources, gpu_mask and
// gpus agreeing, unique role names. The error names the job, role and field.
absl::Status ValidateJob(const JobRequest& job);

// Total resource of the job when every task of every role runs (scalars
// only: memory, vcores, gpus).
Resource JobDemand(const JobRequest& job);

// GPUs the job holds when every task runs.
int64_t JobGpus(const JobRequest& job);

}  // namespace trainyard::core
