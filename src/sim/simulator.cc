// The event loop of the simulator; see simulator.h. Simulated time is whole
// seconds since the trace's epoch; the scheduler sees it as absl::Time.
#include "sim/simulator.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <queue>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler/scheduler.h"
#include "sim/cluster_build.h"
#include "sim/cluster_meter.h"

namespace trainyard::sim {
namespace {

// Spans of the allocation timeline in the JSON report.
constexpr int kTimelineSpans = 100;

absl::Time AtSecond(int64_t t) { return absl::UnixEpoch() + absl::Seconds(t); }

int64_t SecondOf(absl::Time t) {
  return static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(t - absl::UnixEpoch())));
}

enum class Phase { kFuture, kWaiting, kRunning, kPreempting, kDone, kUnschedulable };

// What the simulator knows of one job beyond the scheduler's state.
struct JobRun {
  Phase phase = Phase::kFuture;
  int64_t remaining_s = kRunsForever;
  int64_t first_start = -1;
  int64_t last_start = -1;
  int64_t finish = -1;
  uint32_t generation = 0;  // bumped at each start; older events are stale
  std::vector<core::NodeId> nodes;  // where its tasks run
  std::string reason;               // why it is unschedulable
};

// Completions come before the ends of grace periods at the same instant.
// kRipen: a job's run reaches the preemption minimum run time, so a round
// runs then (nothing else may happen at that instant to call one).
enum class EventKind { kCompletion = 0, kRequeue = 1, kRipen = 2 };

struct Event {
  int64_t t;
  EventKind kind;
  int32_t job;
  uint32_t generation;
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return job > o.job;
  }
};

class Simulation {
 public:
  Simulation(const NodeList& nodes, const Trace& trace, const SimOptions& options)
      : nodes_(nodes), trace_(trace), options_(options), feasibility_(nodes) {}

  absl::Status Init();
  absl::Status Run();
  SimReport Report() const;

 private:
  void DropIdleRipens();
  bool HasEvent() const;
  int64_t NextTime() const;
  bool HandleEvent(const Event& e);
  bool Arrive(int32_t j, int64_t t);
  void RunRound(int64_t t);
  void Place(int64_t t, const core::JobPlacement& p);
  void Preempt(const core::Preemption& p);
  void Measure(int64_t t);
  void RefreshNodes(const std::vector<core::NodeId>& nodes);
  void FillJobCounts(SimReport* r) const;

  const NodeList& nodes_;
  const Trace& trace_;
  SimOptions options_;
  FeasibilityCheck feasibility_;
  std::unique_ptr<core::Scheduler> scheduler_;
  ClusterMeter meter_;
  std::vector<JobRun> runs_;
  absl::flat_hash_map<std::string, int32_t> job_by_id_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  size_t next_arrival_ = 0;
  std::vector<core::PendingReason> last_pending_;
  TimeWeighted alloc_{/*keep_history=*/true};
  TimeWeighted frag_[2];
  int64_t first_t_ = 0;
  int64_t last_t_ = 0;
  int64_t rounds_ = 0;
  int64_t decisions_ = 0;
  int64_t tasks_placed_ = 0;
  int64_t preemptions_ = 0;
  int64_t preempted_jobs_ = 0;
  double scheduler_wall_s_ = 0;
};

absl::Status Simulation::Init() {
  core::SchedulerOptions opt;
  opt.queue_policy = options_.queue_policy;
  opt.placement = options_.placement;
  opt.queues = options_.queues ? *options_.queues : QueuesForTrace(trace_);
  opt.reservation_wait = absl::Seconds(options_.reservation_wait_s);
  opt.preemption_grace = absl::Seconds(options_.preemption_grace_s);
  opt.preemption_min_runtime = absl::Seconds(options_.preemption_min_runtime_s);
  opt.enable_preemption = options_.enable_preemption;
  opt.seed = options_.seed;
  opt.limits = LimitsForNodes(nodes_);
  auto scheduler = core::Scheduler::Create(opt);
  if (!scheduler.ok()) return scheduler.status();
  scheduler_ = *std::move(scheduler);
  for (const NodeSpec& node : nodes_.nodes) {
    auto spec = ToCoreNode(node, nodes_.source);
    if (!spec.ok()) return spec.status();
    if (auto s = scheduler_->AddNode(*spec); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(nodes_.source, ":", node.line, ": ", s.message()));
    }
    meter_.AddNode(*scheduler_->state().FindNode(node.name), spec->topology);
  }
  runs_.resize(trace_.jobs.size());
  job_by_id_.reserve(trace_.jobs.size());
  for (size_t j = 0; j < trace_.jobs.size(); ++j) {
    job_by_id_[trace_.jobs[j].name] = static_cast<int32_t>(j);
    runs_[j].remaining_s = options_.fill ? kRunsForever : trace_.jobs[j].duration_s;
  }
  if (options_.max_rounds == 0) {
    options_.max_rounds = 20 * static_cast<int64_t>(trace_.jobs.size()) + 1000;
  }
  first_t_ = trace_.jobs.empty() ? 0 : trace_.jobs.front().submit_s;
  return absl::OkStatus();
}

// A ripening that can change nothing (its job left, or nothing waits and
// no job arrives before it) is dropped, so that it does not move the clock
// past the last real event.
void Simulation::DropIdleRipens() {
  while (!events_.empty() && events_.top().kind == EventKind::kRipen) {
    const Event& e = events_.top();
    const JobRun& run = runs_[e.job];
    bool live = e.generation == run.generation && run.phase == Phase::kRunning;
    bool arrival_first =
        next_arrival_ < trace_.jobs.size() && trace_.jobs[next_arrival_].submit_s < e.t;
    if (live && (!last_pending_.empty() || arrival_first)) return;
    events_.pop();
  }
}

bool Simulation::HasEvent() const {
  return !events_.empty() || next_arrival_ < trace_.jobs.size();
}

int64_t Simulation::NextTime() const {
  int64_t t = INT64_MAX;
  if (!events_.empty()) t = events_.top().t;
  if (next_arrival_ < trace_.jobs.size()) t = std::min(t, trace_.jobs[next_arrival_].submit_s);
  return t;
}

absl::Status Simulation::Run() {
  while (DropIdleRipens(), HasEvent()) {
    int64_t t = NextTime();
    bool changed = false;
    while (!events_.empty() && events_.top().t == t) {
      Event e = events_.top();
      events_.pop();
      changed |= HandleEvent(e);
    }
    while (next_arrival_ < trace_.jobs.size() && trace_.jobs[next_arrival_].submit_s == t) {
      changed |= Arrive(static_cast<int32_t>(next_arrival_++), t);
    }
    if (changed) {
      if (++rounds_ > options_.max_rounds) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "simulation stopped after ", options_.max_rounds, " scheduling rounds at t=", t,
            "s: jobs keep preempting one another"));
      }
      RunRound(t);
    }
    Measure(t);
  }
  alloc_.Finish(last_t_);
  for (TimeWeighted& f : frag_) f.Finish(last_t_);
  return absl::OkStatus();
}

bool Simulation::HandleEvent(const Event& e) {
  JobRun& run = runs_[e.job];
  const std::string& id = trace_.jobs[e.job].name;
  if (e.generation != run.generation) return false;
  // It may be a victim from now on: worth a round while a job waits.
  if (e.kind == EventKind::kRipen) return run.phase == Phase::kRunning && !last_pending_.empty();
  if (e.kind == EventKind::kCompletion) {
    if (run.phase != Phase::kRunning && run.phase != Phase::kPreempting) return false;
    if (!scheduler_->RemoveJob(id).ok()) return false;
    run.phase = Phase::kDone;
    run.finish = e.t;
  } else {
    if (run.phase != Phase::kPreempting) return false;
    if (!scheduler_->RequeueJob(id).ok()) return false;
    if (run.remaining_s != kRunsForever) {
      run.remaining_s = std::max<int64_t>(0, run.remaining_s - (e.t - run.last_start));
    }
    run.generation += 1;  // its completion event is void now
    run.phase = Phase::kWaiting;
  }
  RefreshNodes(run.nodes);
  run.nodes.clear();
  return true;
}

bool Simulation::Arrive(int32_t j, int64_t t) {
  const JobSpec& job = trace_.jobs[j];
  JobRun& run = runs_[j];
  run.reason = feasibility_.Unschedulable(job);
  if (run.reason.empty()) {
    absl::Status added = scheduler_->AddJob(ToCoreJob(job, AtSecond(t)));
    if (added.ok()) {
      run.phase = Phase::kWaiting;
      return true;
    }
    run.reason = std::string(added.message());
  }
  run.phase = Phase::kUnschedulable;
  return false;
}

void Simulation::RunRound(int64_t t) {
  auto start = std::chrono::steady_clock::now();
  core::Decisions d = scheduler_->Schedule(AtSecond(t));
  scheduler_wall_s_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  decisions_ += static_cast<int64_t>(d.placements.size() + d.preemptions.size() + d.pending.size());
  for (const core::JobPlacement& p : d.placements) Place(t, p);
  for (const core::Preemption& p : d.preemptions) Preempt(p);
  last_pending_ = std::move(d.pending);
}

void Simulation::Place(int64_t t, const core::JobPlacement& p) {
  auto it = job_by_id_.find(p.job_id);
  if (it == job_by_id_.end()) return;
  JobRun& run = runs_[it->second];
  run.phase = Phase::kRunning;
  if (run.first_start < 0) run.first_start = t;
  run.last_start = t;
  run.generation += 1;
  run.nodes.clear();
  for (const core::TaskAssignment& task : p.tasks) {
    if (auto n = scheduler_->state().FindNode(task.node)) run.nodes.push_back(*n);
  }
  RefreshNodes(run.nodes);
  tasks_placed_ += static_cast<int64_t>(p.tasks.size());
  if (run.remaining_s != kRunsForever) {
    events_.push(Event{t + run.remaining_s, EventKind::kCompletion, it->second, run.generation});
  }
  if (options_.enable_preemption && options_.preemption_min_runtime_s > 0) {
    events_.push(Event{t + options_.preemption_min_runtime_s, EventKind::kRipen, it->second,
                       run.generation});
  }
}

void Simulation::Preempt(const core::Preemption& p) {
  auto it = job_by_id_.find(p.victim_job_id);
  if (it == job_by_id_.end()) return;
  JobRun& run = runs_[it->second];
  if (run.phase != Phase::kRunning) return;
  run.phase = Phase::kPreempting;
  preemptions_ += static_cast<int64_t>(p.tasks.size());
  preempted_jobs_ += 1;
  events_.push(Event{SecondOf(p.grace_deadline), EventKind::kRequeue, it->second, run.generation});
}

void Simulation::RefreshNodes(const std::vector<core::NodeId>& nodes) {
  const core::ClusterState& state = scheduler_->state();
  for (core::NodeId n : nodes) meter_.Update(n, core::GpuSet(state.node(n).free.gpu_mask));
}

void Simulation::Measure(int64_t t) {
  last_t_ = t;
  alloc_.Set(t, meter_.AllocationRatio());
  for (int i = 0; i < 2; ++i) frag_[i].Set(t, meter_.Fragmentation(i));
}


void Simulation::FillJobCounts(SimReport* r) const {
  absl::flat_hash_map<std::string, const std::string*> pending_reason;
  for (const core::PendingReason& p : last_pending_) pending_reason[p.job_id] = &p.reason;
  std::vector<double> waits;
  std::vector<double> completions;
  for (size_t j = 0; j < runs_.size(); ++j) {
    const JobRun& run = runs_[j];
    const JobSpec& job = trace_.jobs[j];
    if (run.first_start >= 0) {
      r->jobs_started += 1;
      waits.push_back(static_cast<double>(run.first_start - job.submit_s));
    }
    if (run.phase == Phase::kDone) {
      r->jobs_finished += 1;
      completions.push_back(static_cast<double>(run.finish - job.submit_s));
    } else if (run.phase == Phase::kRunning || run.phase == Phase::kPreempting) {
      r->jobs_running_at_end += 1;
    } else if (run.phase == Phase::kUnschedulable) {
      r->jobs_unschedulable += 1;
      if (r->unschedulable.size() < options_.listed_jobs) r->unschedulable.push_back({job.name, run.reason});
    } else if (run.phase == Phase::kWaiting) {
      r->jobs_pending_at_end += 1;
      if (r->pending_at_end.size() < options_.listed_jobs) {
        auto it = pending_reason.find(job.name);
        r->pending_at_end.push_back(
            {job.name, it == pending_reason.end() ? "no reason given" : *it->second});
      }
    }
  }
  r->wait_s = Summarize(&waits);
  r->completion_s = Summarize(&completions);
}

SimReport Simulation::Report() const {
  SimReport r;
  r.queue_policy = options_.queue_policy;
  r.placement = options_.placement;
  r.fill = options_.fill;
  r.nodes_source = nodes_.source;
  r.trace_source = trace_.source;
  r.trace_format = trace_.format;
  r.topology_assumed = nodes_.topology_assumed;
  r.nodes = static_cast<int64_t>(nodes_.nodes.size());
  r.gpus = meter_.total_gpus();
  r.jobs = static_cast<int64_t>(trace_.jobs.size());
  r.tasks = trace_.task_count;
  r.rounded_up_tasks = trace_.rounded_up_tasks;
  FillJobCounts(&r);
  r.tasks_placed = tasks_placed_;
  r.preemptions = preemptions_;
  r.preempted_jobs = preempted_jobs_;
  r.gpu_alloc_mean = alloc_.Mean();
  r.gpu_alloc_peak = alloc_.Peak();
  r.gpu_alloc_peak_time_s = alloc_.PeakTime();
  r.gpu_alloc_timeline = alloc_.Buckets(kTimelineSpans);
  r.gpu_alloc_timeline_step_s = alloc_.BucketSeconds(kTimelineSpans);
  r.makespan_s = last_t_ - first_t_;
  r.frag4_mean = frag_[0].Mean();
  r.frag8_mean = frag_[1].Mean();
  r.scheduler_calls = rounds_;
  r.decisions = decisions_;
  r.scheduler_wall_s = scheduler_wall_s_;
  return r;
}

}  // namespace

absl::StatusOr<SimReport> Simulate(const NodeList& nodes, const Trace& trace,
                                   const SimOptions& options) {
  auto start = std::chrono::steady_clock::now();
  Simulation sim(nodes, trace, options);
  if (auto s = sim.Init(); !s.ok()) return s;
  if (auto s = sim.Run(); !s.ok()) return s;
  SimReport report = sim.Report();
  report.sim_wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace trainyard::sim
