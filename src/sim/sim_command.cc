// The body of `trainyard sim`; see sim_command.h.
#include "sim/sim_command.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/queue_config_yaml.h"
#include "core/scheduler/scheduler.h"
#include "sim/cluster_build.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

struct Input {
  NodeList nodes;
  Trace trace;
};

absl::StatusOr<Input> LoadInput(const SimCommandOptions& o) {
  bool files = !o.nodes_path.empty() || !o.trace_path.empty();
  if (files && o.synthetic) {
    return absl::InvalidArgumentError(
        "give either --nodes and --trace, or --synthetic-nodes and --synthetic-tasks, not both");
  }
  Input in;
  if (o.synthetic) {
    if (auto s = ValidateSynthetic(*o.synthetic); !s.ok()) return s;
    in.nodes = SyntheticNodes(*o.synthetic);
    in.trace = SyntheticTrace(*o.synthetic);
    return in;
  }
  if (o.nodes_path.empty() || o.trace_path.empty()) {
    return absl::InvalidArgumentError(
        "--nodes NODES.csv and --trace TASKS.csv are both required (or use --synthetic-nodes "
        "and --synthetic-tasks)");
  }
  auto nodes = ReadNodeList(o.nodes_path);
  if (!nodes.ok()) return nodes.status();
  auto trace = ReadTrace(o.trace_path);
  if (!trace.ok()) return trace.status();
  in.nodes = *std::move(nodes);
  in.trace = *std::move(trace);
  return in;
}

// Fails fast, before any long run, on a policy name the core does not know.
absl::Status CheckPolicies(const std::string& queue_policy, const std::string& placement,
                           const core::QueuesConfig& queues) {
  core::SchedulerOptions opt;
  opt.queue_policy = queue_policy;
  opt.placement = placement;
  opt.queues = queues;
  auto s = core::Scheduler::Create(opt);
  if (s.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--queue-policy ", queue_policy, " --placement ", placement, ": ",
                   s.status().message()));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitPolicyList(const std::string& list,
                                                         const std::string& flag) {
  std::vector<std::string> out;
  absl::flat_hash_set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    std::string name(absl::StripAsciiWhitespace(part));
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " '", list, "': an empty name"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " '", list, "': '", name, "' twice"));
    }
    out.push_back(std::move(name));
  }
  return out;
}

absl::StatusOr<std::vector<SimReport>> RunSimCommand(const SimCommandOptions& options_in) {
  SimCommandOptions options = options_in;
  if (!options.queues_path.empty()) {
    auto file = api::LoadQueueConfigFile(options.queues_path);
    if (!file.ok()) return file.status();
    options.base.queues = file->queues;
    if (options.queue_policies.empty()) options.queue_policies = file->policy;
  }
  if (options.queue_policies.empty()) options.queue_policies = "fifo";
  auto queue_policies = SplitPolicyList(options.queue_policies, "--queue-policy");
  if (!queue_policies.ok()) return queue_policies.status();
  auto placements = SplitPolicyList(options.placements, "--placement");
  if (!placements.ok()) return placements.status();
  auto input = LoadInput(options);
  if (!input.ok()) return input.status();
  core::QueuesConfig queues = options.base.queues ? *options.base.queues : QueuesForTrace(input->trace);
  for (const std::string& q : *queue_policies) {
    for (const std::string& p : *placements) {
      if (auto s = CheckPolicies(q, p, queues); !s.ok()) return s;
    }
  }
  std::vector<SimReport> reports;
  for (const std::string& q : *queue_policies) {
    for (const std::string& p : *placements) {
      SimOptions run = options.base;
      run.queue_policy = q;
      run.placement = p;
      run.queues = queues;
      auto report = Simulate(input->nodes, input->trace, run);
      if (!report.ok()) return report.status();
      reports.push_back(*std::move(report));
    }
  }
  return reports;
}

}  // namespace trainyard::sim
