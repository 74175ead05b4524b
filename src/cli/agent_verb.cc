// `trainyard agent`: runs the node agent in the foreground until SIGINT /
// SIGTERM. Tasks keep running when the agent stops (a restarted agent adopts
// them), unless --kill-tasks-on-exit.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/agent_core.h"
#include "agent/agent_metrics.h"
#include "agent/server_link.h"
#include "cli/verbs.h"
#include "common/clock.h"
#include "common/logging.h"

namespace trainyard::cli {
namespace {

struct AgentFlags {
  agent::AgentConfig config;
  std::string server = "127.0.0.1:7450";
  std::string labels;
  double vcores = 0;
  bool kill_tasks_on_exit = false;
  std::string task_user_map;
  std::string task_workdir_roots;
  std::string log_level = "info";
  std::string http_listen;  // "" = no /metrics
};

int RunAgent(AgentFlags& f) {
  LogLevel level;
  if (!ParseLogLevel(f.log_level, &level)) {
    std::cerr << "--log-level: '" << f.log_level << "' is not one of debug, info, warning, error\n";
    return kExitUsage;
  }
  SetLogLevel(level);
  if (!f.labels.empty()) {
    for (absl::string_view part : absl::StrSplit(f.labels, ',')) {
      std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty()) {
        std::cerr << "--labels: '" << part << "' is not KEY=VALUE\n";
        return kExitUsage;
      }
      f.config.labels[kv[0]] = kv[1];
    }
  }
  if (f.vcores > 0) f.config.vcores_milli = static_cast<int64_t>(f.vcores * 1000);
  if (!f.task_user_map.empty()) {
    absl::StatusOr<agent::TaskUserMap> map = agent::TaskUserMap::Load(f.task_user_map);
    if (!map.ok()) {
      std::cerr << "trainyard agent: " << map.status().message() << "\n";
      return kExitUsage;
    }
    f.config.task_users.map = *std::move(map);
  }
  for (absl::string_view root : absl::StrSplit(f.task_workdir_roots, ',', absl::SkipEmpty())) {
    if (root.empty() || root[0] != '/') {
      std::cerr << "--task-workdir-roots: '" << root << "' is not an absolute path\n";
      return kExitUsage;
    }
    f.config.task_users.workdir_roots.emplace_back(root);
  }
  // Files and directories the agent creates (logs, task records with env
  // values, checkpoints) are its own unless it says otherwise.
  umask(077);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before threads start: they inherit it

  RealClock clock;
  f.config.clock = &clock;
  agent::ServerLink link({.server = f.server, .clock = &clock});
  // The core makes --data-dir absolute: tasks start in other directories.
  auto core = agent::AgentCore::Start(f.config, &link);
  if (!core.ok()) {
    std::cerr << "trainyard agent: " << core.status().message() << "\n";
    return kExitFailure;
  }
  // Its /metrics (public, like the server's; loopback unless a host is named).
  std::unique_ptr<httpd::HttpServer> http;
  if (!f.http_listen.empty()) {
    auto served = agent::ServeAgentMetrics(f.http_listen, core->get());
    if (!served.ok()) {
      std::cerr << "trainyard agent: " << served.status().message() << "\n";
      return kExitUsage;
    }
    http = *std::move(served);
    Log(LogLevel::kInfo, "agent", "/metrics on http://%s/metrics", http->address());
  }
  const agent::NodeInfo& info = (*core)->node_info();
  std::cout << "trainyard agent " << info.name << ": " << info.topology.gpu_count() << " GPUs ("
            << info.gpu_source << "), " << info.memory_mb << " MB, " << info.vcores_milli / 1000.0
            << " vcores, ports "
            << (info.port_range.Empty() ? "as the server decides" : info.port_range.ToString())
            << "; server " << f.server << (http ? absl::StrCat("; /metrics on http://", http->address(), "/metrics") : "")
            << std::endl;
  link.Start(core->get());
  int sig = 0;
  sigwait(&set, &sig);
  Log(LogLevel::kInfo, "agent", "signal %d: stopping%s", sig, f.kill_tasks_on_exit ? " and killing tasks" : "");
  if (f.kill_tasks_on_exit) {
    // Said first, on the stream the tasks' ends then follow: the server
    // takes their ends as a stop with the node (jobs requeued, no restart
    // charged), not as failures.
    bool announced = link.AnnounceStop(absl::StrCat("its agent was stopped by signal ", sig));
    (*core)->supervisor().KillAll();
    absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      bool running = false;
      for (const auto& t : (*core)->supervisor().Snapshot()) running |= !agent::IsFinal(t.state);
      if (!running) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Until the server has taken in those ends (they would otherwise be lost
    // with a server stopped right after, as `trainyard up` does).
    if (announced && !link.WaitDrained(absl::Seconds(5))) {
      Log(LogLevel::kWarning, "agent", "the server did not confirm the stop of this node's tasks");
    }
  }
  if (http) http->Stop();
  link.Stop();
  return kExitOk;
}

}  // namespace

void RegisterAgent(CLI::App& app, int* exit_code) {
  static AgentFlags f;
  auto* cmd = app.add_subcommand("agent", "Run the node agent");
  cmd->add_option("--server", f.server, "server address host:port");
  cmd->add_option("--name", f.config.node_name, "node name (default: the host name)");
  cmd->add_option("--address", f.config.address, "address other tasks reach this node on");
  cmd->add_option("--rack", f.config.rack, "rack of the node");
  cmd->add_option("--data-center", f.config.data_center, "data center of the node");
  cmd->add_option("--labels", f.labels, "node labels KEY=VALUE,...");
  cmd->add_option("--data-dir", f.config.data_dir, "where task logs, work dirs and state go")->required();
  cmd->add_option("--simulate-gpus", f.config.gpu.simulate_gpus, "simulate this many GPUs");
  cmd->add_option("--gpu-topology", f.config.gpu.gpu_topology, "topology spec of simulated GPUs");
  cmd->add_option("--gpu-model", f.config.gpu.simulated_model,
                  "model of simulated GPUs, as tasks name it in gpuModel (e.g. A10, V100M32)");
  cmd->add_option("--mps", f.config.mps,
                  "CUDA MPS for GPU shares: off (default), auto (where nvidia-cuda-mps-control is found and the GPUs "
                  "are real) or on");
  cmd->add_option("--mps-control", f.config.mps_control,
                  "the MPS control program (default: nvidia-cuda-mps-control in PATH)");
  cmd->add_option("--memory-mb", f.config.memory_mb, "memory to offer (default: MemTotal)");
  cmd->add_option("--vcores", f.vcores, "CPU cores to offer (default: the CPUs this process may use)");
  cmd->add_option("--port-range", f.config.port_range, "ports to serve, e.g. [20000-29999] (default: the server's defaultPortRange, else 1024-65535 minus the kernel's ephemeral range)");
  cmd->add_flag("--exclude-ownerless-gpus", f.config.ownerless.enable,
                "exclude GPUs busy with processes Trainyard did not start");
  cmd->add_option("--gpu-not-ready-memory-threshold-mb", f.config.ownerless.not_ready_memory_threshold_mb,
                  "used memory above which a GPU with no task of ours counts as busy");
  cmd->add_option("--log-max-attempt-bytes", f.config.log_max_attempt_bytes,
                  "the most bytes kept of each task attempt's logs, stdout and stderr half each; the newest part is "
                  "kept (default 100 MiB; 0: no cap)");
  cmd->add_flag("--kill-tasks-on-exit", f.kill_tasks_on_exit, "kill every task when the agent stops");
  cmd->add_option("--task-user-map", f.task_user_map,
                  "when the agent is root, the local account each cluster user's tasks run as: lines "
                  "`user: account` (an account name or a uid), `\"*\": account` for everyone else (default: the "
                  "account of the user's own name)");
  cmd->add_flag("--allow-root-tasks", f.config.task_users.allow_root, "let a user map to root (uid or gid 0)");
  cmd->add_option("--task-workdir-roots", f.task_workdir_roots,
                  "directories a task's workingDir may lie under, comma-separated, besides its own and its "
                  "checkpoint directory (default: the home of the account it runs as)");
  cmd->add_option("--task-pids-max", f.config.task_pids_max,
                  "the most processes and threads of one task at once (a pids cgroup; default 4096, 0: no limit)");
  cmd->add_option("--http-listen", f.http_listen,
                  "serve /metrics (Prometheus) on HOST:PORT; a bare PORT is on 127.0.0.1, port 0 any free port "
                  "(default: none)");
  cmd->add_option("--log-level", f.log_level, "debug, info, warning or error");
  cmd->callback([exit_code] { *exit_code = RunAgent(f); });
}

}  // namespace trainyard::cli
