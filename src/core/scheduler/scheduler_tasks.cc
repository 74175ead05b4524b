// Scheduler: one task of a placed job — placed again after its node was
// lost (through the queue policy's admission and the gang placer's node
// choice, as any gang task), adopted where it runs after a restart, and
// recovered jobs marked running. These are the only ways besides a round
// that an allocation enters the state, so no caller writes it directly.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "core/policy/gang_placer.h"
#include "core/policy/pending_reason.h"
#include "core/scheduler/scheduler.h"

namespace trainyard::core {

struct Scheduler::TaskRef {
  JobSlot job = -1;
  int32_t role = 0;
};

namespace {

std::string TaskText(std::string_view job_id, std::string_view role, int32_t index) {
  return absl::StrCat("job ", std::string(job_id), " task ", std::string(role), "-", index);
}

absl::Status CheckTaskAllocation(const Resource& a) {
  if (!NonNegative(a)) return absl::InvalidArgumentError("a quantity is negative");
  if (a.port_count != 0) {
    return absl::InvalidArgumentError("port_count must be 0: an allocation holds exact ports");
  }
  if (a.gpu_milli != 0) {
    if (a.gpus != 0 || a.gpu_milli >= 1000 || GpuSet(a.gpu_mask).Count() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gpu_milli ", a.gpu_milli, " must be a share (1..999) of exactly one GPU, with gpus 0; "
          "got gpus ", a.gpus, " and gpu_mask ", GpuSet(a.gpu_mask).ToString()));
    }
    return absl::OkStatus();
  }
  if (a.gpus != GpuSet(a.gpu_mask).Count()) {
    return absl::InvalidArgumentError(absl::StrCat("gpus ", a.gpus, " differs from gpu_mask ",
                                                   GpuSet(a.gpu_mask).ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Scheduler::TaskRef> Scheduler::FreeTask(std::string_view job_id,
                                                       std::string_view role, int32_t index,
                                                       Purpose purpose) const {
  std::optional<JobSlot> j = state_.FindJob(job_id);
  if (!j.has_value()) return absl::NotFoundError(absl::StrCat("job ", std::string(job_id), " is not known"));
  const JobState& job = state_.job(*j);
  const std::vector<RoleRequest>& roles = job.request.roles;
  auto it = std::find_if(roles.begin(), roles.end(),
                         [&](const RoleRequest& r) { return r.name == role; });
  if (it == roles.end()) {
    return absl::NotFoundError(absl::StrCat("job ", std::string(job_id), " has no role ", std::string(role)));
  }
  if (index < 0 || index >= it->count) {
    return absl::NotFoundError(absl::StrCat("job ", std::string(job_id), " role ", std::string(role), " has ", it->count,
                                            it->count == 1 ? " task" : " tasks",
                                            "; there is no index ", index));
  }
  // A victim's task that runs may be adopted (it holds what it holds until
  // the job is requeued), never placed anew.
  bool placeable = job.phase == JobPhase::kRunning ||
                   (job.phase == JobPhase::kPreempting && purpose == Purpose::kAdopt);
  if (!placeable) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", std::string(job_id), job.phase == JobPhase::kPending
                                         ? " is pending: a round places it whole"
                                         : " is being preempted"));
  }
  TaskRef ref{.job = *j, .role = static_cast<int32_t>(it - roles.begin())};
  for (const PlacedTask& t : job.tasks) {
    if (t.role == ref.role && t.index == index && t.node >= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(TaskText(job_id, role, index), " still holds its allocation on node ",
                       state_.node(t.node).name, "; call TaskFinished first"));
    }
  }
  return ref;
}

absl::StatusOr<TaskAssignment> Scheduler::PlaceTask(std::string_view job_id,
                                                    std::string_view role, int32_t index) {
  absl::StatusOr<TaskRef> ref = FreeTask(job_id, role, index, Purpose::kPlace);
  if (!ref.ok()) return ref.status();
  const JobState& job = state_.job(ref->job);
  Resource demand = ScalarsOf(job.request.roles[ref->role].resource);
  if (std::string why = queue_policy_->AdmitTask(state_, job, demand); !why.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat(TaskText(job_id, role, index), ": ", why));
  }
  GangPlacer placer(&state_, placement_.get(), options_.seed);
  PlaceResult result = placer.PlaceOne(ref->job, ref->role, index);
  if (!result.placed) {
    Diagnosis diag = DiagnoseTask(state_, placer, ref->job, ref->role);
    return absl::ResourceExhaustedError(
        absl::StrCat(TaskText(job_id, role, index), ": ", diag.reason));
  }
  // PlaceOne appended the task's record last.
  const PlacedTask& t = state_.job(ref->job).tasks.back();
  return TaskAssignment{.role = std::string(role),
                        .index = index,
                        .node = state_.node(t.node).name,
                        .allocation = t.allocation};
}

int Scheduler::RoomForTasks(std::string_view job_id, const std::vector<std::pair<std::string, int32_t>>& tasks,
                            absl::Status* why) {
  *why = absl::OkStatus();
  // Placed again after its resize, the job is admitted on its whole count
  // (TryJob): counted here on top of what it holds now, so a yes holds then.
  if (std::optional<JobSlot> j = state_.FindJob(job_id); j.has_value()) {
    if (std::string refused = queue_policy_->Admit(state_, state_.job(*j)); !refused.empty()) {
      *why = absl::ResourceExhaustedError(absl::StrCat("job ", std::string(job_id), ": ", refused));
      return 0;
    }
  }
  int fit = 0;
  for (const auto& [role, index] : tasks) {
    absl::StatusOr<TaskAssignment> placed = PlaceTask(job_id, role, index);
    if (!placed.ok()) {
      *why = placed.status();
      break;
    }
    ++fit;
  }
  if (fit > 0) {
    std::optional<JobSlot> j = state_.FindJob(job_id);
    TY_CHECK(j.has_value(), "job %s placed tasks and is gone", std::string(job_id).c_str());
    // PlaceTask appended each placement last: undone from the last.
    for (int k = 0; k < fit; ++k) state_.UndoLastTask(*j);
  }
  return fit;
}

absl::Status Scheduler::AdoptTask(std::string_view job_id, std::string_view role, int32_t index,
                                  std::string_view node_name, const Resource& allocation) {
  absl::StatusOr<TaskRef> ref = FreeTask(job_id, role, index, Purpose::kAdopt);
  if (!ref.ok()) return ref.status();
  std::optional<NodeId> n = state_.FindNode(node_name);
  if (!n.has_value()) {
    return absl::NotFoundError(absl::StrCat(TaskText(job_id, role, index), ": node ", std::string(node_name),
                                            " is not in the cluster"));
  }
  if (absl::Status s = CheckTaskAllocation(allocation); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(TaskText(job_id, role, index), ": allocation: ", s.message()));
  }
  // A GPU excluded since (faulty, cordoned) stays the adopted task's.
  if (std::string taken = NotFree(allocation, state_.node(*n), state_.ReclaimableGpus(*n)); !taken.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        TaskText(job_id, role, index), ": its allocation on node ", std::string(node_name), " is not free (",
        taken, ")"));
  }
  state_.AllocateTask(ref->job, ref->role, index, *n, allocation);
  return absl::OkStatus();
}

absl::Status Scheduler::MarkRunning(std::string_view job_id, absl::Time start) {
  std::optional<JobSlot> j = state_.FindJob(job_id);
  if (!j.has_value()) return absl::NotFoundError(absl::StrCat("job ", std::string(job_id), " is not known"));
  if (state_.job(*j).phase != JobPhase::kPending) {
    return absl::FailedPreconditionError(absl::StrCat("job ", std::string(job_id), " is not pending"));
  }
  std::string id(job_id);
  ClearReservation(id);
  awaiting_.erase(id);
  state_.SetPhase(*j, JobPhase::kRunning, start);
  state_.SetReason(*j, "");
  return absl::OkStatus();
}

}  // namespace trainyard::core
