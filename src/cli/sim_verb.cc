// `trainyard sim`: replays a node list and task trace (or a synthetic
// workload) through the scheduler core on a simulated clock and prints a
// table (one column per policy combination) or JSON. Flag parsing only;
// the work is sim::RunSimCommand.
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/verbs.h"
#include "sim/fgd_protocol.h"
#include "sim/replay_protocol.h"
#include "sim/sim_command.h"
#include "sim/trace_readers.h"

namespace trainyard::cli {
namespace {

struct SimFlags {
  sim::SimCommandOptions command;
  sim::SyntheticOptions synthetic;
  bool json = false;
  bool no_preemption = false;
  std::string protocol;
  std::string seeds = "42";
  std::string fgd_policies;
  double inflate = 1.3;
  double arrival_scale = 1.0;
  int samples = 10;
};

void AddSyntheticFlags(CLI::App* cmd, SimFlags* f) {
  cmd->add_option("--synthetic-nodes", f->synthetic.nodes,
                  "Synthetic mode: this many identical nodes (instead of --nodes/--trace)");
  cmd->add_option("--gpus-per-node", f->synthetic.gpus_per_node, "Synthetic mode: GPUs per node")
      ->capture_default_str();
  cmd->add_option("--synthetic-tasks", f->synthetic.tasks,
                  "Synthetic mode: tasks submitted at time 0 that never end")
      ->capture_default_str();
  cmd->add_option("--gang", f->synthetic.gang, "Synthetic mode: tasks per job (gang size)")
      ->capture_default_str();
  cmd->add_option("--gpus-per-task", f->synthetic.gpus_per_task, "Synthetic mode: GPUs per task")
      ->capture_default_str();
}

void AddFlags(CLI::App* cmd, SimFlags* f) {
  cmd->add_option("--nodes", f->command.nodes_path,
                  "Node list CSV (Alibaba openb sn,cpu_milli,memory_mib,gpu,model or Trainyard's)");
  cmd->add_option("--trace", f->command.trace_path,
                  "Task trace CSV (Alibaba openb pod list or Trainyard job trace; see docs/sim.md)");
  cmd->add_option("--queue-policy", f->command.queue_policies,
                  "Queue policies, comma separated, one run each: fifo, capacity, fair "
                  "(default: the queues file's policy, else fifo)");
  cmd->add_option("--queues", f->command.queues_path,
                  "Queue tree YAML (default: one equal leaf per queue the trace names)");
  cmd->add_option("--placement", f->command.placements,
                  "Placement strategies, comma separated, one run each: topology, spread")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print JSON instead of a table");
  cmd->add_option("--preemption-grace", f->command.base.preemption_grace_s,
                  "Seconds a preemption victim runs on before it is stopped")
      ->capture_default_str();
  cmd->add_option("--preemption-min-runtime", f->command.base.preemption_min_runtime_s,
                  "Seconds a job runs before it may be preempted (0 = at once)")
      ->capture_default_str();
  cmd->add_option("--reservation-wait", f->command.base.reservation_wait_s,
                  "Seconds a head-of-line job waits before capacity is reserved for it")
      ->capture_default_str();
  cmd->add_flag("--no-preemption", f->no_preemption, "Never preempt");
  cmd->add_flag("--fill", f->command.base.fill,
                "Ignore the trace's end times: jobs run until the end and fill the cluster");
  cmd->add_option("--seed", f->command.base.seed, "Seed of the scheduler's tie-breaks")
      ->capture_default_str();
  cmd->add_option("--list-jobs", f->command.base.listed_jobs,
                  "How many unschedulable / still-pending jobs to list by name")
      ->capture_default_str();
  AddSyntheticFlags(cmd, f);
  cmd->add_option("--protocol", f->protocol,
                  "fgd: the FGD paper's experiment (tasks one by one, no departures); replay: the pod "
                  "list in time, arrivals and departures, queueing delay and allocation over time "
                  "(docs/sim.md)");
  cmd->add_option("--arrival-scale", f->arrival_scale,
                  "replay protocol: arrival rate as a multiple of the trace's (arrival times divided by it)")
      ->capture_default_str();
  cmd->add_option("--samples", f->samples, "replay protocol: allocation samples over the arrivals' span")
      ->capture_default_str();
  cmd->add_option("--seeds", f->seeds, "fgd protocol: seeds, e.g. 42-51 or 1,2,3")
      ->capture_default_str();
  cmd->add_option("--inflate", f->inflate,
                  "fgd protocol: workload GPU demand as a multiple of the cluster's GPU capacity")
      ->capture_default_str();
  cmd->add_option("--fgd-policies", f->fgd_policies,
                  "fgd protocol: policies, comma separated (default: first-fit, best-fit, random, "
                  "fgd, trainyard (= core:fragmentation, the server's default); also fgd-int and "
                  "core:PLACEMENT, the server's own placement, e.g. core:fragmentation, core:topology)");
}

int Fail(const absl::Status& s) {
  std::cerr << "trainyard sim: " << s.message() << "\n";
  return absl::IsInvalidArgument(s) || absl::IsNotFound(s) ? kExitUsage : kExitFailure;
}

// --protocol replay: one seed (the first of --seeds), the policies named.
int RunReplay(SimFlags* f, const sim::NodeList& nodes, const sim::Trace& trace) {
  sim::ReplayOptions options;
  options.arrival_scale = f->arrival_scale;
  options.samples = f->samples;
  auto seeds = sim::ParseSeedList(f->seeds);
  if (!seeds.ok()) return Fail(seeds.status());
  options.seed = seeds->front();
  auto names = sim::SplitPolicyList(
      f->fgd_policies.empty() ? "best-fit,fgd,fgd-int,core:fragmentation,core:topology" : f->fgd_policies,
      "--fgd-policies");
  if (!names.ok()) return Fail(names.status());
  options.policies = *names;
  auto report = sim::RunReplayProtocol(nodes, trace, options);
  if (!report.ok()) return Fail(report.status());
  std::cout << (f->json ? sim::ReplayReportToJson(*report).dump(2) + "\n" : sim::FormatReplayReport(*report));
  return kExitOk;
}

int RunProtocol(SimFlags* f) {
  auto fail = Fail;
  if (f->protocol != "fgd" && f->protocol != "replay") {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--protocol '", f->protocol, "' is unknown; the protocols are fgd and replay")));
  }
  if (f->command.nodes_path.empty() || f->command.trace_path.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--protocol ", f->protocol, " needs --nodes NODES.csv and --trace PODS.csv")));
  }
  if (f->protocol == "replay") {
    auto nodes = sim::ReadNodeList(f->command.nodes_path);
    if (!nodes.ok()) return fail(nodes.status());
    auto trace = sim::ReadTrace(f->command.trace_path);
    if (!trace.ok()) return fail(trace.status());
    return RunReplay(f, *nodes, *trace);
  }
  sim::FgdOptions options;
  options.inflate = f->inflate;
  auto seeds = sim::ParseSeedList(f->seeds);
  if (!seeds.ok()) return fail(seeds.status());
  options.seeds = *seeds;
  if (!f->fgd_policies.empty()) {
    auto names = sim::SplitPolicyList(f->fgd_policies, "--fgd-policies");
    if (!names.ok()) return fail(names.status());
    options.policies = *names;
  }
  auto nodes = sim::ReadNodeList(f->command.nodes_path);
  if (!nodes.ok()) return fail(nodes.status());
  auto trace = sim::ReadTrace(f->command.trace_path);
  if (!trace.ok()) return fail(trace.status());
  auto report = sim::RunFgdProtocol(*nodes, *trace, options);
  if (!report.ok()) return fail(report.status());
  if (f->json) {
    std::cout << sim::FgdReportToJson(*report).dump(2) << "\n";
  } else {
    std::cout << sim::FormatFgdReport(*report);
  }
  return kExitOk;
}

int RunSim(CLI::App* cmd, SimFlags* f) {
  if (!f->protocol.empty()) return RunProtocol(f);
  if (cmd->count("--synthetic-nodes") > 0) f->command.synthetic = f->synthetic;
  f->command.base.enable_preemption = !f->no_preemption;
  auto reports = sim::RunSimCommand(f->command);
  if (!reports.ok()) {
    std::cerr << "trainyard sim: " << reports.status().message() << "\n";
    return absl::IsInvalidArgument(reports.status()) || absl::IsNotFound(reports.status())
               ? kExitUsage
               : kExitFailure;
  }
  if (f->json) {
    std::cout << sim::ReportsToJson(*reports).dump(2) << "\n";
  } else {
    std::cout << sim::FormatReportTable(*reports);
  }
  return kExitOk;
}

}  // namespace

void RegisterSim(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("sim", "Replay a cluster trace through the scheduler core and report");
  static SimFlags flags;
  AddFlags(cmd, &flags);
  cmd->callback([cmd, exit_code] { *exit_code = RunSim(cmd, &flags); });
}

}  // namespace trainyard::cli
