// The FGD protocol's workload, run loop and report; see fgd_protocol.h.
#include "sim/fgd_protocol.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/policy/placement_policy.h"
#include "sim/fgd_cluster.h"
#include "sim/fgd_core_policy.h"
#include "sim/fgd_policies.h"
#include "sim/policy_table.h"

namespace trainyard::sim {

absl::StatusOr<ProtoCluster> BuildProtoCluster(const NodeList& list) {
  ProtoCluster c;
  for (const NodeSpec& n : list.nodes) {
    std::string spec = n.topology.empty() ? core::DefaultTopologySpec(n.gpus) : n.topology;
    auto topo = core::GpuTopology::FromSpec(spec);
    if (!topo.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(list.source, ":", n.line,
                                                     ": field 'topology': ", topo.status().message()));
    }
    ProtoNode node;
    node.cpu_capacity = n.cpu_milli;
    node.memory_free = n.memory_mib;
    c.topologies.push_back(std::make_unique<core::GpuTopology>(*std::move(topo)));
    node.topology = c.topologies.back().get();
    node.frag.cpu_free_milli = n.cpu_milli;
    node.frag.gpu_count = n.gpus;
    for (int g = 0; g < n.gpus; ++g) node.frag.free[g] = 1000;
    if (!n.gpu_model.empty()) {
      auto it = std::find(c.models.begin(), c.models.end(), n.gpu_model);
      if (it == c.models.end() && c.models.size() >= static_cast<size_t>(kNoSuchModel)) {
        return absl::InvalidArgumentError(
            absl::StrCat(list.source, ": more than ", kNoSuchModel, " GPU models"));
      }
      node.frag.model = static_cast<int32_t>(it - c.models.begin());
      if (it == c.models.end()) c.models.push_back(n.gpu_model);
    }
    c.gpu_capacity += int64_t{n.gpus} * 1000;
    c.nodes.push_back(node);
  }
  return c;
}

ProtoTask ToProtoTask(const JobSpec& job, int32_t index, const std::vector<std::string>& models) {
  const RoleSpec& role = job.roles.front();
  ProtoTask t{.job = index};
  t.shape.cpu_milli = role.cpu_milli;
  t.memory_mib = role.memory_mib;
  if (role.gpus == 1 && role.gpu_milli > 0 && role.gpu_milli < 1000) {
    t.shape.gpu_milli = role.gpu_milli;
  } else {
    t.shape.gpus = role.gpus;
  }
  for (const std::string& m : job.gpu_models) {
    auto it = std::find(models.begin(), models.end(), m);
    t.shape.models |= uint64_t{1} << (it == models.end() ? kNoSuchModel : it - models.begin());
  }
  return t;
}

void PlaceOn(ProtoNode& node, const ProtoTask& t, const core::GpuPick& pick) {
  node.memory_free -= t.memory_mib;
  node.frag = core::AfterPick(node.frag, t.shape, pick);
}

namespace {

// Uniform in [0, n) without modulo bias, so a seed means the same workload
// with every standard library.
uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do x = rng(); while (x >= limit);
  return x % n;
}

// Sorted by name, shuffled, then inflated (or deflated) to the target.
std::vector<ProtoTask> Workload(const std::vector<std::pair<std::string, ProtoTask>>& by_name,
                                int64_t target, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ProtoTask> tasks;
  for (const auto& [name, t] : by_name) tasks.push_back(t);
  for (size_t i = tasks.size(); i > 1; --i) std::swap(tasks[i - 1], tasks[Below(rng, i)]);
  int64_t demand = 0;
  for (const ProtoTask& t : tasks) demand += t.shape.GpuDemand();
  while (demand < target) {
    const ProtoTask& t = by_name[Below(rng, by_name.size())].second;
    tasks.push_back(t);
    demand += t.shape.GpuDemand();
  }
  while (demand > target && !tasks.empty()) {
    size_t i = Below(rng, tasks.size());
    if (demand - tasks[i].shape.GpuDemand() < target) break;
    demand -= tasks[i].shape.GpuDemand();
    tasks.erase(tasks.begin() + i);
  }
  return tasks;
}

std::string ShapeKey(const ProtoTask& t) {
  if (t.shape.gpus > 0) return absl::StrCat(t.shape.gpus, "-gpu");
  return t.shape.gpu_milli > 0 ? "share" : "cpu-only";
}

// One point's measures on the cluster as it is.
FgdPoint Measure(const ProtoCluster& c, int64_t allocated, int64_t failed,
                 const core::ShapeDistribution& workload) {
  FgdPoint p;
  double cap = static_cast<double>(c.gpu_capacity);
  p.gpu_alloc_pct = 100.0 * static_cast<double>(allocated) / cap;
  double frag = 0;
  for (const ProtoNode& n : c.nodes) {
    for (int g = 0; g < n.frag.gpu_count; ++g) p.unallocated_gpus += n.frag.free[g] >= 1000;
    frag += workload.Fragmentation(n.frag);
  }
  p.fragmentation_pct = 100.0 * frag / cap;
  p.failed_tasks = static_cast<double>(failed);
  return p;
}

struct SeedRun {
  std::map<std::string, FgdPoint> at;
  std::map<std::string, double> failed;
  double seconds = 0;
};

// The input of a run besides the cluster: the files, for core policies.
struct RunInput {
  const NodeList& nodes;
  const Trace& trace;
};

absl::StatusOr<std::unique_ptr<ProtoPolicy>> MakePolicy(const std::string& name, uint64_t seed,
                                                        const std::vector<ProtoTask>& tasks,
                                                        const RunInput& in) {
  if (IsCorePolicy(name)) return MakeCorePolicy(name, seed, in.nodes, in.trace);
  return MakeProtoPolicy(name, seed, tasks);
}

absl::StatusOr<SeedRun> RunOne(const ProtoCluster& base, const std::vector<ProtoTask>& tasks,
                               const std::string& policy_name, uint64_t seed,
                               const std::vector<double>& points, const RunInput& in) {
  auto policy = MakePolicy(policy_name, seed, tasks, in);
  if (!policy.ok()) return policy.status();
  core::ShapeDistribution workload;
  for (const ProtoTask& t : tasks) workload.Add(t.shape);
  auto start = std::chrono::steady_clock::now();
  ProtoCluster c;
  c.nodes = base.nodes;
  c.gpu_capacity = base.gpu_capacity;
  SeedRun run;
  int64_t arrived = 0, allocated = 0, failed = 0;
  size_t next = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ProtoTask& t = tasks[i];
    (*policy)->Arrived(t);
    ProtoChoice choice;
    if ((*policy)->Choose(c.nodes, t, &choice)) {
      PlaceOn(c.nodes[choice.node], t, choice.pick);
      (*policy)->Changed(choice.node);
      allocated += t.shape.GpuDemand();
    } else {
      ++failed;
      run.failed[ShapeKey(t)] += 1;
      if (t.shape.models != 0) run.failed["model-constrained"] += 1;
    }
    arrived += t.shape.GpuDemand();
    bool last = i + 1 == tasks.size();
    while (next < points.size() &&
           (static_cast<double>(arrived) >= points[next] * static_cast<double>(c.gpu_capacity) - 0.5 ||
            last)) {
      run.at[absl::StrCat(std::lround(points[next] * 100))] = Measure(c, allocated, failed, workload);
      ++next;
    }
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

void Accumulate(const SeedRun& run, double w, FgdPolicyResult* r) {
  for (const auto& [key, p] : run.at) {
    FgdPoint& q = r->at_arrived[key];
    q.gpu_alloc_pct += w * p.gpu_alloc_pct;
    q.unallocated_gpus += w * p.unallocated_gpus;
    q.fragmentation_pct += w * p.fragmentation_pct;
    q.failed_tasks += w * p.failed_tasks;
  }
  for (const auto& [key, n] : run.failed) r->failed_by_shape[key] += w * n;
  r->seconds_per_seed += w * run.seconds;
}

}  // namespace

const std::vector<std::string>& FgdPolicyNames() {
  static const auto* const kNames =
      new std::vector<std::string>{"first-fit", "best-fit", "random", "fgd", "trainyard"};
  return *kNames;
}

absl::StatusOr<std::vector<uint64_t>> ParseSeedList(const std::string& text) {
  std::vector<uint64_t> seeds;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    uint64_t lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || !absl::SimpleAtoi(ends.back(), &hi) || hi < lo ||
        hi - lo >= 100000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--seeds '", text, "': '", part, "' is not a seed or a range such as 42-51"));
    }
    for (uint64_t s = lo; s <= hi; ++s) seeds.push_back(s);
  }
  return seeds;
}

absl::StatusOr<FgdReport> RunFgdProtocol(const NodeList& nodes, const Trace& trace,
                                         const FgdOptions& options) {
  if (options.seeds.empty()) return absl::InvalidArgumentError("--seeds: no seeds given");
  if (!(options.inflate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--inflate ", options.inflate, " must be above 0"));
  }
  std::vector<std::string> policies = options.policies.empty() ? FgdPolicyNames() : options.policies;
  for (const std::string& p : policies) {
    if (IsCorePolicy(p)) {
      auto made = core::MakePlacementPolicy(CorePlacementOf(p));
      if (!made.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--fgd-policies ", p, ": ", made.status().message()));
      }
    } else if (auto made = MakeProtoPolicy(p, 0, {}); !made.ok()) {
      return made.status();
    }
  }
  auto cluster = BuildProtoCluster(nodes);
  if (!cluster.ok()) return cluster.status();
  if (cluster->gpu_capacity == 0) {
    return absl::InvalidArgumentError(absl::StrCat(nodes.source, ": the cluster has no GPUs"));
  }
  std::vector<std::pair<std::string, ProtoTask>> by_name;
  for (size_t j = 0; j < trace.jobs.size(); ++j) {
    const JobSpec& job = trace.jobs[j];
    if (job.roles.size() != 1 || job.roles[0].count != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          trace.source, ":", job.line, ": job ", job.name,
          " is a gang; the fgd protocol places single tasks (an Alibaba openb pod list)"));
    }
    by_name.emplace_back(job.name, ToProtoTask(job, static_cast<int32_t>(j), cluster->models));
  }
  std::sort(by_name.begin(), by_name.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t demand = 0;
  for (const auto& [name, t] : by_name) demand += t.shape.GpuDemand();
  if (demand == 0) return absl::InvalidArgumentError(absl::StrCat(trace.source, ": no task asks for a GPU"));
  int64_t target = std::llround(options.inflate * static_cast<double>(cluster->gpu_capacity));
  std::vector<double> points = {1.0};
  if (std::fabs(options.inflate - 1.0) > 1e-9) points.push_back(options.inflate);
  std::sort(points.begin(), points.end());
  FgdReport report{.nodes_source = nodes.source, .trace_source = trace.source,
                   .seeds = options.seeds, .inflate = options.inflate,
                   .gpu_capacity_milli = cluster->gpu_capacity};
  for (const std::string& p : policies) report.policies.push_back(FgdPolicyResult{.name = p});
  double w = 1.0 / static_cast<double>(options.seeds.size());
  double tasks_total = 0;
  for (uint64_t seed : options.seeds) {
    std::vector<ProtoTask> tasks = Workload(by_name, target, seed);
    tasks_total += static_cast<double>(tasks.size());
    for (FgdPolicyResult& r : report.policies) {
      auto run = RunOne(*cluster, tasks, r.name, seed, points, RunInput{nodes, trace});
      if (!run.ok()) return run.status();
      Accumulate(*run, w, &r);
    }
  }
  report.tasks_per_seed = std::llround(tasks_total * w);
  return report;
}

nlohmann::json FgdReportToJson(const FgdReport& report) {
  nlohmann::json policies = nlohmann::json::object();
  for (const FgdPolicyResult& r : report.policies) {
    nlohmann::json alloc, unalloc, frag, failed_at;
    for (const auto& [key, p] : r.at_arrived) {
      alloc[key] = p.gpu_alloc_pct;
      unalloc[key] = p.unallocated_gpus;
      frag[key] = p.fragmentation_pct;
      failed_at[key] = p.failed_tasks;
    }
    policies[r.name] = {{"gpu_alloc_pct_at_arrived", alloc},
                        {"unallocated_gpus_at_arrived", unalloc},
                        {"fragmentation_pct_at_arrived", frag},
                        {"failed_tasks_at_arrived", failed_at},
                        {"failed_tasks_by_shape", r.failed_by_shape},
                        {"seconds_per_seed", r.seconds_per_seed}};
  }
  return {{"protocol", "fgd"},
          {"nodes", report.nodes_source},
          {"trace", report.trace_source},
          {"seeds", report.seeds},
          {"inflate", report.inflate},
          {"gpu_capacity_milli", report.gpu_capacity_milli},
          {"tasks_per_seed", report.tasks_per_seed},
          {"policies", policies}};
}

std::string FormatFgdReport(const FgdReport& report) {
  std::string out = absl::StrFormat(
      "fgd protocol: %s on %s, %d seeds, inflate %.2f, %d tasks per seed, %d GPUs\n",
      report.trace_source, report.nodes_source, report.seeds.size(), report.inflate,
      report.tasks_per_seed, report.gpu_capacity_milli / 1000);
  PolicyTable table(&out, report.policies);
  auto row = [&](const std::string& label, auto value) { table.Row(label, value); };
  if (report.policies.empty()) return out;
  for (const auto& point : report.policies.front().at_arrived) {
    const std::string& key = point.first;
    auto at = [&key](const FgdPolicyResult& r) { return r.at_arrived.at(key); };
    row(absl::StrCat("GPU allocated % at arrived ", key, "%"), [&](const auto& r) { return at(r).gpu_alloc_pct; });
    row(absl::StrCat("unallocated GPUs at ", key, "%"), [&](const auto& r) { return at(r).unallocated_gpus; });
    row(absl::StrCat("fragmentation % at ", key, "%"), [&](const auto& r) { return at(r).fragmentation_pct; });
    row(absl::StrCat("failed tasks at ", key, "%"), [&](const auto& r) { return at(r).failed_tasks; });
  }
  std::set<std::string> shapes;
  for (const FgdPolicyResult& r : report.policies) {
    for (const auto& [k, v] : r.failed_by_shape) shapes.insert(k);
  }
  for (const std::string& s : shapes) {
    row(absl::StrCat("failed ", s), [&](const FgdPolicyResult& r) {
      auto it = r.failed_by_shape.find(s);
      return it == r.failed_by_shape.end() ? 0.0 : it->second;
    });
  }
  row("seconds per seed", [](const FgdPolicyResult& r) { return r.seconds_per_seed; });
  return out;
}

}  // namespace trainyard::sim
