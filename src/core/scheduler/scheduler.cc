// Scheduler: one round walks the queues in the queue policy's order and
// tries each pending job as a gang; a job that does not fit may preempt
// lower-priority work (or reclaim for a starved queue), and the oldest
// job waiting past reservation_wait holds nodes as they drain.
#include "core/scheduler/scheduler.h"

#include <queue>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/policy/gang_placer.h"
#include "core/policy/pending_reason.h"
#include "core/policy/preemption.h"
#include "core/scheduler/round.h"

namespace trainyard::core {

namespace {

// Same signature, same placement outcome within a round.
std::string Signature(const JobState& job) {
  std::string key = absl::StrCat(static_cast<int>(job.request.priority), "|", job.queue);
  for (const RoleRequest& r : job.request.roles) {
    const Resource& x = r.resource;
    absl::StrAppend(&key, "|", r.count, ",", r.MinAvailable(), ",", x.memory_mb, ",",
                    x.vcores_milli, ",", x.gpus, ",", x.gpu_mask, ",", x.ports.ToString(), ",",
                    x.port_count, ",", r.node_selector.ToString(), ",", r.node_name, ",", r.rack,
                    ",", r.relax, ",", x.gpu_milli, ",", x.gpu_memory_mb, ",",
                    absl::StrJoin(r.gpu_models, "/"));
  }
  return key;
}

absl::Status CheckLimits(const JobRequest& job, const AllocationLimits& limits) {
  for (const RoleRequest& role : job.roles) {
    const Resource& r = role.resource;
    auto err = [&](absl::string_view what, int64_t v, absl::string_view bound, int64_t limit) {
      return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " role ", role.name, ": ",
                                                     what, " ", v, " is ", bound,
                                                     " allocation ", limit));
    };
    if (r.gpus > limits.max_gpus) return err("gpus", r.gpus, "above the maximum", limits.max_gpus);
    if (r.gpus < limits.min_gpus) return err("gpus", r.gpus, "below the minimum", limits.min_gpus);
    if (r.memory_mb > limits.max_memory_mb) {
      return err("memory_mb", r.memory_mb, "above the maximum", limits.max_memory_mb);
    }
    if (r.memory_mb < limits.min_memory_mb) {
      return err("memory_mb", r.memory_mb, "below the minimum", limits.min_memory_mb);
    }
    if (r.vcores_milli > limits.max_vcores_milli) {
      return err("vcores_milli", r.vcores_milli, "above the maximum", limits.max_vcores_milli);
    }
    if (r.vcores_milli < limits.min_vcores_milli) {
      return err("vcores_milli", r.vcores_milli, "below the minimum", limits.min_vcores_milli);
    }
    int64_t ports = r.port_count + r.ports.Count();
    if (ports > limits.max_ports) return err("ports", ports, "above the maximum", limits.max_ports);
  }
  return absl::OkStatus();
}

}  // namespace

std::string TimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options) {
  absl::StatusOr<QueuePolicyPtr> queues = MakeQueuePolicy(options.queue_policy, options.queues);
  if (!queues.ok()) return queues.status();
  absl::StatusOr<PlacementPolicyPtr> placement = MakePlacementPolicy(options.placement);
  if (!placement.ok()) return placement.status();
  if (options.reservation_wait < absl::ZeroDuration() ||
      options.preemption_grace < absl::ZeroDuration() ||
      options.preemption_min_runtime < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "scheduler options: reservation_wait, preemption_grace and preemption_min_runtime must "
        "not be negative");
  }
  return std::unique_ptr<Scheduler>(
      new Scheduler(options, *std::move(queues), *std::move(placement)));
}

Scheduler::Scheduler(SchedulerOptions options, QueuePolicyPtr queues,
                     PlacementPolicyPtr placement)
    : options_(std::move(options)),
      queue_policy_(std::move(queues)),
      placement_(std::move(placement)) {}

absl::Status Scheduler::AddJob(const JobRequest& job) {
  if (absl::Status s = ValidateJob(job); !s.ok()) return s;
  if (absl::Status s = CheckLimits(job, options_.limits); !s.ok()) return s;
  if (absl::Status s = queue_policy_->CheckQueue(job.queue); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, ": ", s.message()));
  }
  if (absl::Status s = state_.AddJob(job); !s.ok()) return s;
  placement_->Observe(state_, job);
  return absl::OkStatus();
}

absl::Status Scheduler::RemoveJob(std::string_view id) {
  ClearReservation(std::string(id));
  awaiting_.erase(std::string(id));
  return state_.RemoveJob(id);
}

absl::Status Scheduler::RequeueJob(std::string_view id) {
  ClearReservation(std::string(id));
  return state_.RequeueJob(id);
}

Decisions Scheduler::Schedule(absl::Time now) {
  Decisions decisions;
  Round round{.now = now, .out = &decisions, .placer = GangPlacer(&state_, placement_.get(), options_.seed)};
  state_.ExpireCoolingPorts(now, options_.port_quarantine);
  DropStaleReservations();
  queue_policy_->BeginRound(state_, now);
  RunQueues(round);
  ReportPending(round);
  return decisions;
}

void Scheduler::RunQueues(Round& round) {
  size_t queues = state_.queue_names().size();
  std::vector<std::vector<JobSlot>> lists(queues);
  for (size_t q = 0; q < queues; ++q) {
    for (const PendingKey& key : state_.pending(static_cast<int32_t>(q))) {
      lists[q].push_back(key.job);
    }
  }
  using Entry = std::tuple<QueueRank, int32_t, size_t>;  // rank, queue, cursor
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t q = 0; q < queues; ++q) {
    if (lists[q].empty()) continue;
    int32_t qi = static_cast<int32_t>(q);
    heap.emplace(queue_policy_->Rank(state_, qi, state_.job(lists[q][0])), qi, 0);
  }
  while (!heap.empty()) {
    auto [rank, q, cursor] = heap.top();
    heap.pop();
    TryJob(round, lists[q][cursor]);
    if (++cursor < lists[q].size()) {
      heap.emplace(queue_policy_->Rank(state_, q, state_.job(lists[q][cursor])), q, cursor);
    }
  }
}

void Scheduler::TryJob(Round& round, JobSlot j) {
  const JobState& job = state_.job(j);
  if (job.phase != JobPhase::kPending || WaitingForVictims(j)) return;
  if (std::string why = queue_policy_->Admit(state_, job); !why.empty()) {
    state_.SetReason(j, std::move(why));
    return;
  }
  bool owner = reservations_.contains(job.request.id);
  std::string key;
  if (!owner && !round.memo.empty()) {
    key = Signature(job);
    if (auto it = round.memo.find(key); it != round.memo.end()) {
      state_.SetReason(j, it->second.reason);
      return;
    }
  }
  PlaceResult result = round.placer.Place(j);
  if (result.placed) {
    Commit(round, j);
    return;
  }
  Diagnosis diag = DiagnosePlacement(state_, round.placer, j, result);
  // Why preemption must wait: its victims are younger than the minimum run
  // time. Then that, not the shortage, is what the user can wait out.
  std::string later;
  if (diag.resources_short && options_.enable_preemption && TryPreempt(round, j, &later)) return;
  if (!later.empty()) diag.reason = std::move(later);
  if (diag.resources_short && !owner && starving_job_.empty() &&
      round.now - job.request.submit_time >= options_.reservation_wait) {
    Reserve(round, j);
    if (reservations_.contains(job.request.id)) return;
  }
  if (owner) {
    state_.SetReason(j, ReservationReason(job.request.id));
    return;
  }
  if (key.empty()) key = Signature(job);
  round.memo.emplace(key, diag);
  state_.SetReason(j, std::move(diag.reason));
}

void Scheduler::Commit(Round& round, JobSlot j) {
  state_.SetPhase(j, JobPhase::kRunning, round.now);
  state_.SetReason(j, "");
  const std::string& id = state_.job(j).request.id;
  ClearReservation(id);
  round.out->placements.push_back(JobPlacement{.job_id = id, .tasks = state_.Assignments(j)});
}

bool Scheduler::WaitingForVictims(JobSlot j) {
  const std::string& id = state_.job(j).request.id;
  auto it = awaiting_.find(id);
  if (it == awaiting_.end()) return false;
  int left = 0;
  absl::Time deadline = absl::InfinitePast();
  for (const std::string& victim : it->second) {
    std::optional<JobSlot> v = state_.FindJob(victim);
    if (v.has_value() && state_.job(*v).phase == JobPhase::kPreempting) {
      ++left;
      deadline = std::max(deadline, state_.job(*v).grace_deadline);
    }
  }
  if (left == 0) {
    awaiting_.erase(it);
    return false;
  }
  state_.SetReason(j, absl::StrCat("waiting for ", left, left == 1 ? " preempted job" :
                                   " preempted jobs", " to stop (grace until ",
                                   TimeText(deadline), ")"));
  return true;
}

}  // namespace trainyard::core
