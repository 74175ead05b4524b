// Scheduler: priority preemption, queue reclaim, the anti-starvation
// reservation, and pending-reason reporting.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/policy/preemption.h"
#include "core/scheduler/round.h"

namespace trainyard::core {

// Victims for pending job j: by priority (strictly lower classes), else by
// queue reclaim. With `ripe_only`, only victims whose current run reached
// the minimum run time. Sets *why to the reason the victims are told.
std::optional<VictimChoice> Scheduler::FindVictims(Round& round, JobSlot j, bool ripe_only,
                                                   std::string* why) {
  const JobState& job = state_.job(j);
  PriorityClass p = job.request.priority;
  absl::Time ripe_before = round.now - options_.preemption_min_runtime;
  auto ripe = [&](const JobBrief& v) { return !ripe_only || v.start_time <= ripe_before; };
  std::optional<VictimChoice> choice;
  if (p > PriorityClass::kPtr) {
    choice = ChooseVictims(
        &state_, &round.placer, j, [&](const JobBrief& v) { return v.priority < p && ripe(v); },
        round.now);
    *why = absl::StrCat("preempted by ", PriorityClassName(p), " job ", job.request.id,
                        " (priority)");
  }
  int32_t queue = job.queue;
  if (!choice.has_value() && queue_policy_->MayReclaim(state_, queue, round.now)) {
    choice = ChooseVictims(
        &state_, &round.placer, j,
        [&](const JobBrief& v) {
          return v.priority <= p && ripe(v) &&
                 queue_policy_->IsReclaimVictim(state_, queue, v.queue);
        },
        round.now);
    *why = absl::StrCat("preempted to return resources to queue ", job.request.queue,
                        " (below its share) for job ", job.request.id);
  }
  return choice;
}

// When preemption failed only because victims are too young: a search that
// ignores the minimum run time, and the time its youngest victim ripens.
// "" when there is no minimum, no search left this round, or no such set.
std::string Scheduler::WhenVictimsRipen(Round& round, JobSlot j) {
  absl::Duration min = options_.preemption_min_runtime;
  if (min <= absl::ZeroDuration()) return "";
  if (round.preemption_searches >= options_.max_preemption_searches) return "";
  ++round.preemption_searches;
  std::string unused;
  std::optional<VictimChoice> choice = FindVictims(round, j, /*ripe_only=*/false, &unused);
  if (!choice.has_value()) return "";
  std::optional<JobSlot> youngest;
  int young = 0;
  for (JobSlot v : choice->victims) {
    absl::Time start = state_.job(v).start_time;
    if (round.now - start >= min) continue;
    ++young;
    if (!youngest.has_value() || start > state_.job(*youngest).start_time) youngest = v;
  }
  if (!youngest.has_value()) return "";  // the strict search missed a ripe set; retried next round
  const JobState& v = state_.job(*youngest);
  std::string who = young == 1 ? absl::StrCat("job ", v.request.id)
                               : absl::StrCat(young, " jobs it would preempt, the youngest ",
                                              v.request.id, ",");
  // Rounded up: the time shown is never before the victim may go.
  absl::Time ripe = absl::UnixEpoch() +
                    absl::Ceil(v.start_time + min - absl::UnixEpoch(), absl::Seconds(1));
  return absl::StrCat("preemption possible at ", TimeText(ripe), ": ", who,
                      " started ", absl::ToInt64Seconds(round.now - v.start_time),
                      " s ago, below the ", absl::ToDoubleSeconds(min), " s minimum run time");
}

bool Scheduler::TryPreempt(Round& round, JobSlot j, std::string* later) {
  if (round.preemption_searches >= options_.max_preemption_searches) return false;
  ++round.preemption_searches;
  const JobState& job = state_.job(j);
  std::string why;
  std::optional<VictimChoice> choice = FindVictims(round, j, /*ripe_only=*/true, &why);
  if (!choice.has_value()) {
    *later = WhenVictimsRipen(round, j);
    return false;
  }
  absl::Time deadline = round.now + options_.preemption_grace;
  std::vector<std::string>& waiting = awaiting_[job.request.id];
  waiting.clear();
  for (JobSlot v : choice->victims) {
    state_.SetPhase(v, JobPhase::kPreempting, deadline);
    const std::string& victim_id = state_.job(v).request.id;
    waiting.push_back(victim_id);
    round.out->preemptions.push_back(Preemption{.victim_job_id = victim_id,
                                                .for_job_id = job.request.id,
                                                .reason = why,
                                                .grace_deadline = deadline,
                                                .tasks = state_.Assignments(v)});
  }
  SetReservation(job.request.id, j, choice->nodes);
  size_t n = choice->victims.size();
  state_.SetReason(j, absl::StrCat("waiting for ", n, n == 1 ? " preempted job" : " preempted jobs",
                                   " to stop (grace until ", TimeText(deadline), ")"));
  return true;
}

void Scheduler::Reserve(Round& round, JobSlot j) {
  if (round.preemption_searches >= options_.max_preemption_searches) return;
  ++round.preemption_searches;
  std::optional<VictimChoice> drain = ChooseVictims(
      &state_, &round.placer, j, [](const JobBrief&) { return true; }, round.now);
  if (!drain.has_value()) return;
  const std::string& id = state_.job(j).request.id;
  starving_job_ = id;
  SetReservation(id, j, drain->nodes);
  state_.SetReason(j, ReservationReason(id));
}

std::string Scheduler::ReservationReason(const std::string& job_id) const {
  auto it = reservations_.find(job_id);
  if (it == reservations_.end()) return "";
  const std::vector<NodeId>& nodes = it->second.second;
  std::vector<JobSlot> jobs;
  for (NodeId n : nodes) {
    for (const NodeTask& t : state_.node(n).tasks) jobs.push_back(t.job);
  }
  std::sort(jobs.begin(), jobs.end());
  size_t running = std::unique(jobs.begin(), jobs.end()) - jobs.begin();
  return absl::StrCat("holding a reservation on ", nodes.size(),
                      nodes.size() == 1 ? " node" : " nodes", "; waiting for ", running,
                      running == 1 ? " running job" : " running jobs", " there to end");
}

void Scheduler::SetReservation(const std::string& job_id, JobSlot j,
                               const std::vector<NodeId>& nodes) {
  ClearReservation(job_id);
  for (NodeId n : nodes) state_.SetReservation(n, j);
  reservations_[job_id] = {j, nodes};
}

void Scheduler::ClearReservation(const std::string& job_id) {
  auto it = reservations_.find(job_id);
  if (it == reservations_.end()) return;
  const auto& [j, nodes] = it->second;
  for (NodeId n : nodes) {
    if (n < state_.NodeSlots() && state_.node(n).reserved_for == j) {
      state_.SetReservation(n, -1);
    }
  }
  reservations_.erase(it);
  if (starving_job_ == job_id) starving_job_.clear();
}

void Scheduler::DropStaleReservations() {
  std::vector<std::string> stale;
  for (const auto& [id, nodes] : reservations_) {
    std::optional<JobSlot> j = state_.FindJob(id);
    if (!j.has_value() || state_.job(*j).phase != JobPhase::kPending) stale.push_back(id);
  }
  std::sort(stale.begin(), stale.end());
  for (const std::string& id : stale) ClearReservation(id);
  if (!starving_job_.empty() && !reservations_.contains(starving_job_)) starving_job_.clear();
}

void Scheduler::ReportPending(Round& round) {
  for (size_t q = 0; q < state_.queue_names().size(); ++q) {
    for (const PendingKey& key : state_.pending(static_cast<int32_t>(q))) {
      const JobState& job = state_.job(key.job);
      round.out->pending.push_back(PendingReason{.job_id = job.request.id, .reason = job.reason});
    }
  }
}

}  // namespace trainyard::core
