// The time replay of a pod list through placement policies; see
// replay_protocol.h.
#include "sim/replay_protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/scheduler/scheduler.h"
#include "sim/cluster_build.h"
#include "sim/fgd_cluster.h"
#include "sim/fgd_core_policy.h"
#include "sim/policy_table.h"

namespace trainyard::sim {
namespace {

// Holds the waiting pods of one run and places them by one policy.
class Placer {
 public:
  virtual ~Placer() = default;
  // Pod `pod` arrives at `now` and waits.
  virtual void Arrive(int32_t pod, absl::Time now) = 0;
  // Placed pod `pod` leaves, freeing what it holds.
  virtual void Depart(int32_t pod) = 0;
  // Places what fits of the waiting pods, earliest arrival first; appends
  // the pods placed to `placed`.
  virtual void Schedule(absl::Time now, std::vector<int32_t>* placed) = 0;
};

// Gives back what `t` took from `node` with `pick`.
void ReleaseFrom(ProtoNode& node, const ProtoTask& t, const core::GpuPick& pick) {
  node.memory_free += t.memory_mib;
  node.frag.cpu_free_milli += t.shape.cpu_milli;
  for (uint64_t m = pick.gpus.bits(); m != 0; m &= m - 1) {
    int g = __builtin_ctzll(m);
    node.frag.free[g] = static_cast<int16_t>(node.frag.free[g] + pick.milli);
  }
}

// A policy of the FGD protocol over its node model. A pod that found no
// node is asked about again only once a node it fits on changed.
class ProtoPlacer : public Placer {
 public:
  ProtoPlacer(std::vector<ProtoNode> nodes, const std::vector<ProtoTask>& tasks,
              std::unique_ptr<ProtoPolicy> policy)
      : nodes_(std::move(nodes)), tasks_(tasks), policy_(std::move(policy)), held_(tasks.size()) {}

  void Arrive(int32_t pod, absl::Time) override {
    policy_->Arrived(tasks_[pod]);
    waiting_.push_back({pod, true});
  }

  void Depart(int32_t pod) override {
    const Held& h = held_[pod];
    ReleaseFrom(nodes_[h.node], tasks_[pod], h.pick);
    policy_->Changed(h.node);
    changed_.push_back(h.node);
  }

  void Schedule(absl::Time, std::vector<int32_t>* placed) override {
    std::vector<Waiting> still;
    for (Waiting w : waiting_) {
      if (!w.fresh && !FitsOnAChangedNode(tasks_[w.pod])) {
        still.push_back(w);
        continue;
      }
      ProtoChoice choice;
      if (!policy_->Choose(nodes_, tasks_[w.pod], &choice)) {
        still.push_back({w.pod, false});
        continue;
      }
      PlaceOn(nodes_[choice.node], tasks_[w.pod], choice.pick);
      policy_->Changed(choice.node);
      held_[w.pod] = {choice.node, choice.pick};
      placed->push_back(w.pod);
    }
    waiting_ = std::move(still);
    changed_.clear();
  }

 private:
  struct Waiting {
    int32_t pod;
    bool fresh;  // not asked about yet
  };
  struct Held {
    int32_t node = -1;
    core::GpuPick pick;
  };

  bool FitsOnAChangedNode(const ProtoTask& t) const {
    return std::any_of(changed_.begin(), changed_.end(), [&](int32_t n) { return TaskFits(nodes_[n], t); });
  }

  std::vector<ProtoNode> nodes_;
  const std::vector<ProtoTask>& tasks_;
  std::unique_ptr<ProtoPolicy> policy_;
  std::vector<Held> held_;
  std::vector<Waiting> waiting_;
  std::vector<int32_t> changed_;  // nodes that gained room since the last Schedule
};

// The server's path: a core::Scheduler holding each waiting pod as a pending
// one-task job, as the server holds a submitted job.
class CorePlacer : public Placer {
 public:
  CorePlacer(std::unique_ptr<core::Scheduler> scheduler, const Trace& trace, const std::vector<ProtoTask>& tasks)
      : scheduler_(std::move(scheduler)), trace_(trace), tasks_(tasks) {}

  void Arrive(int32_t pod, absl::Time now) override {
    core::JobRequest job = ToCoreJob(trace_.jobs[tasks_[pod].job], now);
    job.id = absl::StrCat("pod-", pod);
    core::Resource& r = job.roles.front().resource;
    r.gpus = tasks_[pod].shape.gpus;
    r.gpu_milli = tasks_[pod].shape.gpu_milli;
    // A pod the core refuses (outside its limits) never places.
    if (scheduler_->AddJob(job).ok()) pod_of_[job.id] = pod;
  }

  // NotFound only: a pod that never fit (AddJob refused it) is not there.
  void Depart(int32_t pod) override { (void)scheduler_->RemoveJob(absl::StrCat("pod-", pod)); }

  void Schedule(absl::Time now, std::vector<int32_t>* placed) override {
    core::Decisions d = scheduler_->Schedule(now);
    for (const core::JobPlacement& p : d.placements) {
      auto it = pod_of_.find(p.job_id);
      if (it != pod_of_.end()) placed->push_back(it->second);
    }
  }

 private:
  std::unique_ptr<core::Scheduler> scheduler_;
  const Trace& trace_;
  const std::vector<ProtoTask>& tasks_;
  absl::flat_hash_map<std::string, int32_t> pod_of_;
};

absl::StatusOr<std::unique_ptr<Placer>> MakePlacer(const std::string& name, uint64_t seed, const NodeList& nodes,
                                                   const Trace& trace, const ProtoCluster& cluster,
                                                   const std::vector<ProtoTask>& tasks) {
  if (IsCorePolicy(name)) {
    auto scheduler = MakeCoreScheduler(name, seed, nodes, trace);
    if (!scheduler.ok()) return scheduler.status();
    return std::make_unique<CorePlacer>(*std::move(scheduler), trace, tasks);
  }
  auto policy = MakeProtoPolicy(name, seed, tasks);
  if (!policy.ok()) return policy.status();
  return std::make_unique<ProtoPlacer>(cluster.nodes, tasks, *std::move(policy));
}

struct Pod {
  int64_t arrival_s = 0;
  int64_t duration_s = kRunsForever;
};

// Delays and allocation of one run, as they accrue.
struct Tally {
  std::vector<int64_t> delays;
  int64_t allocated = 0;      // thousandths of a GPU, now
  double alloc_integral = 0;  // allocated x seconds over the arrival span
  std::vector<double> samples;
};

// Runs pods through `placer` on the simulated clock.
void Replay(const std::vector<Pod>& pods, const std::vector<ProtoTask>& tasks, const std::vector<int64_t>& sample_at,
            Placer& placer, Tally* tally) {
  using Departure = std::pair<int64_t, int32_t>;  // time, pod
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> leaving;
  const int64_t first = pods.empty() ? 0 : pods.front().arrival_s;
  const int64_t last = pods.empty() ? 0 : pods.back().arrival_s;
  size_t next = 0, sample = 0;
  int64_t now = first;
  std::vector<int32_t> placed;
  while (next < pods.size() || !leaving.empty()) {
    int64_t t = next < pods.size() ? pods[next].arrival_s : leaving.top().first;
    if (!leaving.empty()) t = std::min(t, leaving.top().first);
    int64_t from = std::clamp(now, first, last), to = std::clamp(t, first, last);
    tally->alloc_integral += static_cast<double>(tally->allocated) * static_cast<double>(to - from);
    for (; sample < sample_at.size() && sample_at[sample] < t; ++sample) tally->samples.push_back(tally->allocated);
    now = t;
    while (!leaving.empty() && leaving.top().first == t) {
      int32_t pod = leaving.top().second;
      leaving.pop();
      placer.Depart(pod);
      tally->allocated -= tasks[pod].shape.GpuDemand();
    }
    absl::Time at = absl::UnixEpoch() + absl::Seconds(t);
    for (; next < pods.size() && pods[next].arrival_s == t; ++next) placer.Arrive(static_cast<int32_t>(next), at);
    placed.clear();
    placer.Schedule(at, &placed);
    for (int32_t pod : placed) {
      tally->delays.push_back(t - pods[pod].arrival_s);
      tally->allocated += tasks[pod].shape.GpuDemand();
      if (pods[pod].duration_s != kRunsForever) leaving.push({t + pods[pod].duration_s, pod});
    }
  }
  for (; sample < sample_at.size(); ++sample) tally->samples.push_back(tally->allocated);
}

ReplayPolicyResult SummarizePolicy(const std::string& name, const Tally& tally, int64_t pods, int64_t capacity,
                             int64_t span_s) {
  ReplayPolicyResult r{.name = name};
  r.placed = static_cast<int64_t>(tally.delays.size());
  r.never_placed = pods - r.placed;
  std::vector<int64_t> d = tally.delays;
  std::sort(d.begin(), d.end());
  double sum = 0;
  for (int64_t x : d) {
    sum += static_cast<double>(x);
    r.delayed += x > 0;
  }
  if (!d.empty()) {
    r.mean_delay_s = sum / static_cast<double>(d.size());
    size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(d.size())));
    r.p95_delay_s = static_cast<double>(d[std::max<size_t>(rank, 1) - 1]);
    r.max_delay_s = static_cast<double>(d.back());
  }
  double cap = static_cast<double>(capacity);
  r.mean_alloc_pct = span_s > 0 ? 100.0 * tally.alloc_integral / (cap * static_cast<double>(span_s)) : 0;
  for (double s : tally.samples) r.alloc_pct.push_back(100.0 * s / cap);
  return r;
}

// The pods in arrival order (ties keep trace order) with scaled arrivals,
// and their tasks. Errors: a gang.
absl::Status PodsOf(const Trace& trace, const ProtoCluster& cluster, double scale, std::vector<Pod>* pods,
                    std::vector<ProtoTask>* tasks) {
  std::vector<int32_t> order(trace.jobs.size());
  for (size_t j = 0; j < order.size(); ++j) {
    const JobSpec& job = trace.jobs[j];
    if (job.roles.size() != 1 || job.roles[0].count != 1) {
      return absl::InvalidArgumentError(absl::StrCat(trace.source, ":", job.line, ": job ", job.name,
                                                     " is a gang; the replay places single pods (a pod list)"));
    }
    order[j] = static_cast<int32_t>(j);
  }
  auto arrival = [&](int32_t j) { return static_cast<int64_t>(std::floor(trace.jobs[j].submit_s / scale)); };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return arrival(a) < arrival(b); });
  for (int32_t j : order) {
    pods->push_back(Pod{.arrival_s = arrival(j), .duration_s = trace.jobs[j].duration_s});
    tasks->push_back(ToProtoTask(trace.jobs[j], j, cluster.models));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplayReport> RunReplayProtocol(const NodeList& nodes, const Trace& trace,
                                               const ReplayOptions& options) {
  if (options.policies.empty()) return absl::InvalidArgumentError("--fgd-policies: no policies given");
  if (!(options.arrival_scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--arrival-scale ", options.arrival_scale, " must be above 0"));
  }
  if (options.samples < 1) return absl::InvalidArgumentError("--samples must be at least 1");
  auto cluster = BuildProtoCluster(nodes);
  if (!cluster.ok()) return cluster.status();
  if (cluster->gpu_capacity == 0) {
    return absl::InvalidArgumentError(absl::StrCat(nodes.source, ": the cluster has no GPUs"));
  }
  std::vector<Pod> pods;
  std::vector<ProtoTask> tasks;
  if (auto s = PodsOf(trace, *cluster, options.arrival_scale, &pods, &tasks); !s.ok()) return s;
  ReplayReport report{.nodes_source = nodes.source, .trace_source = trace.source,
                      .arrival_scale = options.arrival_scale, .pods = static_cast<int64_t>(pods.size()),
                      .gpu_capacity_milli = cluster->gpu_capacity};
  const int64_t first = pods.empty() ? 0 : pods.front().arrival_s;
  const int64_t span = pods.empty() ? 0 : pods.back().arrival_s - first;
  for (int i = 0; i < options.samples; ++i) {
    report.sample_times_s.push_back(first + (options.samples == 1 ? span : span * i / (options.samples - 1)));
  }
  for (const std::string& name : options.policies) {
    auto placer = MakePlacer(name, options.seed, nodes, trace, *cluster, tasks);
    if (!placer.ok()) return placer.status();
    auto start = std::chrono::steady_clock::now();
    Tally tally;
    Replay(pods, tasks, report.sample_times_s, **placer, &tally);
    ReplayPolicyResult r = SummarizePolicy(name, tally, report.pods, cluster->gpu_capacity, span);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report.policies.push_back(std::move(r));
  }
  return report;
}

nlohmann::json ReplayReportToJson(const ReplayReport& report) {
  nlohmann::json policies = nlohmann::json::object();
  for (const ReplayPolicyResult& r : report.policies) {
    policies[r.name] = {{"placed", r.placed},
                        {"never_placed", r.never_placed},
                        {"delayed", r.delayed},
                        {"mean_delay_s", r.mean_delay_s},
                        {"p95_delay_s", r.p95_delay_s},
                        {"max_delay_s", r.max_delay_s},
                        {"mean_alloc_pct", r.mean_alloc_pct},
                        {"alloc_pct", r.alloc_pct},
                        {"seconds", r.seconds}};
  }
  return {{"protocol", "replay"},
          {"nodes", report.nodes_source},
          {"trace", report.trace_source},
          {"arrival_scale", report.arrival_scale},
          {"pods", report.pods},
          {"gpu_capacity_milli", report.gpu_capacity_milli},
          {"sample_times_s", report.sample_times_s},
          {"policies", policies}};
}

std::string FormatReplayReport(const ReplayReport& report) {
  std::string out = absl::StrFormat("replay: %s on %s, %d pods, arrivals x%.2f, %d GPUs\n", report.trace_source,
                                    report.nodes_source, report.pods, report.arrival_scale,
                                    report.gpu_capacity_milli / 1000);
  PolicyTable table(&out, report.policies);
  auto row = [&](const std::string& label, auto value) { table.Row(label, value); };
  row("queueing delay mean (s)", [](const ReplayPolicyResult& r) { return r.mean_delay_s; });
  row("queueing delay p95 (s)", [](const ReplayPolicyResult& r) { return r.p95_delay_s; });
  row("queueing delay max (s)", [](const ReplayPolicyResult& r) { return r.max_delay_s; });
  row("pods that waited", [](const ReplayPolicyResult& r) { return static_cast<double>(r.delayed); });
  row("pods never placed", [](const ReplayPolicyResult& r) { return static_cast<double>(r.never_placed); });
  row("GPU allocated % (time mean)", [](const ReplayPolicyResult& r) { return r.mean_alloc_pct; });
  for (size_t i = 0; i < report.sample_times_s.size(); ++i) {
    row(absl::StrFormat("GPU allocated %% at t=%ds", report.sample_times_s[i]),
        [i](const ReplayPolicyResult& r) { return i < r.alloc_pct.size() ? r.alloc_pct[i] : 0.0; });
  }
  row("seconds", [](const ReplayPolicyResult& r) { return r.seconds; });
  return out;
}

}  // namespace trainyard::sim
