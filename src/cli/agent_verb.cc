// `trainyard agent`: runs the node agent in the foreground until SIGINT /
// SIGTERM. Tasks keep running when the agent stops (a restarted agent adopts
// them), unless --kill-tasks-on-exit.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "cli/agent_join.h"
#include "api/agent_address.h"
#include "cli/stop_signals.h"
#include "cli/verbs.h"
#include "common/clock.h"
#include "common/logging.h"
#include "security/certs.h"

namespace trainyard::cli {
namespace {

struct AgentFlags {
  agent::AgentConfig config;
  std::string server = "127.0.0.1:7450";
  std::string agent_server;  // the server's agent listener; "" = the port above --server's
  std::string labels;
  double vcores = 0;
  bool kill_tasks_on_exit = false;
  std::string task_user_map;
  std::string task_workdir_roots;
  std::string task_dir_retention = "1h";
  std::string insecure_registries;
  std::string log_level = "info";
  std::string ca;    // TLS: the cluster CA, this node's certificate and key
  std::string cert;
  std::string key;
  std::string join_token;  // join with a token: the node's certificate from the server
  std::string ca_pin;
  std::string http_listen;  // "" = no /metrics
};

// With --join-token: the node's files default to DATA_DIR/tls/, and the
// join happens unless they are there already (a token joins once; a
// restarted agent uses what its join wrote). Errors name the flag.
absl::Status JoinIfAsked(AgentFlags& f) {
  if (f.join_token.empty()) return absl::OkStatus();
  if (f.ca_pin.empty() || f.config.node_name.empty()) {
    return absl::InvalidArgumentError("--join-token needs --ca-pin (sha256:..., as `token create --join` printed) and --name");
  }
  std::error_code ec;
  std::string dir = std::filesystem::absolute(f.config.data_dir, ec).string() + "/tls";
  if (f.ca.empty()) f.ca = dir + "/ca.crt";
  if (f.cert.empty()) f.cert = dir + "/node.crt";
  if (f.key.empty()) f.key = dir + "/node.key";
  if (std::filesystem::exists(f.cert, ec) && std::filesystem::exists(f.key, ec)) {
    Log(LogLevel::kInfo, "agent", "joined before: using %s", f.cert);
    return absl::OkStatus();
  }
  absl::Status st = JoinCluster({.server = f.server, .node = f.config.node_name, .token = f.join_token,
                                 .ca_pin = f.ca_pin, .ca_file = f.ca, .cert_file = f.cert, .key_file = f.key});
  if (st.ok()) Log(LogLevel::kInfo, "agent", "joined the cluster as node %s: certificate in %s", f.config.node_name, f.cert);
  return st;
}

// The link's TLS settings from --ca/--cert/--key (all three, or none for a
// plaintext server). Errors name the flag or the file.
absl::Status TlsOptions(const AgentFlags& f, agent::ServerLinkOptions* o) {
  if (f.ca.empty() && f.cert.empty() && f.key.empty()) return absl::OkStatus();
  if (f.ca.empty() || f.cert.empty() || f.key.empty()) {
    return absl::InvalidArgumentError(
        "--ca, --cert and --key go together: the cluster's CA and this node's certificate and key (`trainyard "
        "certs node NAME`)");
  }
  absl::StatusOr<security::TlsFiles> files = security::LoadTlsFiles(f.ca, f.cert, f.key);
  if (!files.ok()) return files.status();
  o->ca_pem = files->ca_pem;
  o->cert_pem = files->cert_pem;
  o->key_pem = files->key_pem;
  std::error_code ec;
  o->ca_file = std::filesystem::absolute(f.ca, ec).string();
  return absl::OkStatus();
}

// The flags that fill f.config; the error is what to print (it names the
// flag).
absl::Status ReadConfigFlags(AgentFlags& f) {
  if (!f.labels.empty()) {
    for (absl::string_view part : absl::StrSplit(f.labels, ',')) {
      std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty()) {
        return absl::InvalidArgumentError(absl::StrCat("--labels: '", part, "' is not KEY=VALUE"));
      }
      f.config.labels[kv[0]] = kv[1];
    }
  }
  if (f.vcores > 0) f.config.vcores_milli = static_cast<int64_t>(f.vcores * 1000);
  if (!f.task_user_map.empty()) {
    absl::StatusOr<agent::TaskUserMap> map = agent::TaskUserMap::Load(f.task_user_map);
    if (!map.ok()) return absl::InvalidArgumentError(absl::StrCat("trainyard agent: ", map.status().message()));
    f.config.task_users.map = *std::move(map);
  }
  for (absl::string_view r : absl::StrSplit(f.insecure_registries, ',', absl::SkipEmpty())) {
    f.config.insecure_registries.emplace_back(r);
  }
  if (!absl::ParseDuration(f.task_dir_retention, &f.config.task_dir_retention) ||
      f.config.task_dir_retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--task-dir-retention: '", f.task_dir_retention,
                                                   "' is not a duration >= 0 (like 1h, 30m, 0 for at once, inf for never)"));
  }
  for (absl::string_view root : absl::StrSplit(f.task_workdir_roots, ',', absl::SkipEmpty())) {
    if (root.empty() || root[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat("--task-workdir-roots: '", root, "' is not an absolute path"));
    }
    f.config.task_users.workdir_roots.emplace_back(root);
  }
  return absl::OkStatus();
}

// The agent's options from the flags (after the join): the server's agent
// listener, TLS, the node's name. kExitOk, or the exit code of an error it
// printed.
int AgentOptionsFrom(AgentFlags& f, agent::AgentOptions* options) {
  // The stream goes to the server's agent listener (a door of the agents'
  // own); --server stays the address of joins and of the tasks' calls.
  if (f.agent_server.empty()) {
    absl::StatusOr<std::string> derived = api::DerivedAgentAddresses(f.server);
    if (!derived.ok()) {
      std::cerr << "trainyard agent: --server " << derived.status().message() << " (or give --agent-server)\n";
      return kExitUsage;
    }
    f.agent_server = *derived;
  }
  options->config = f.config;
  options->link.server = f.agent_server;
  options->http_listen = f.http_listen;
  if (absl::Status st = TlsOptions(f, &options->link); !st.ok()) {
    std::cerr << "trainyard agent: " << st.message() << "\n";
    return absl::IsInvalidArgument(st) ? kExitUsage : kExitFailure;
  }
  if (!options->link.cert_pem.empty()) {
    // The certificate names the node: --name defaults to it and may not differ.
    std::string cert_node = security::CertCommonName(options->link.cert_pem);
    if (options->config.node_name.empty()) options->config.node_name = cert_node;
    if (options->config.node_name != cert_node) {
      std::cerr << "trainyard agent: --name " << options->config.node_name << ": the certificate " << f.cert
                << " is node '" << cert_node << "''s; the server would refuse any other name\n";
      return kExitUsage;
    }
  }
  return kExitOk;
}

// What the agent offers and where it reports, once it started.
void PrintStarted(const AgentFlags& f, agent::Agent& node) {
  const agent::NodeInfo& info = node.node_info();
  std::string metrics = node.metrics_address();
  std::cout << "trainyard agent " << info.name << ": " << info.topology.gpu_count() << " GPUs ("
            << info.gpu_source << "), " << info.memory_mb << " MB, " << info.vcores_milli / 1000.0
            << " vcores, ports "
            << (info.port_range.Empty() ? "as the server decides" : info.port_range.ToString())
            << "; server " << f.server << ", agent listener " << f.agent_server << (f.ca.empty() ? " (plaintext)" : " (TLS)")
            << (metrics.empty() ? "" : absl::StrCat("; /metrics on http://", metrics, "/metrics")) << std::endl;
}

int RunAgent(AgentFlags& f) {
  LogLevel level;
  if (!ParseLogLevel(f.log_level, &level)) {
    std::cerr << "--log-level: '" << f.log_level << "' is not one of debug, info, warning, error\n";
    return kExitUsage;
  }
  SetLogLevel(level);
  if (absl::Status st = ReadConfigFlags(f); !st.ok()) {
    std::cerr << st.message() << "\n";
    return kExitUsage;
  }
  // Files and directories the agent creates (logs, task records with env
  // values, checkpoints) are its own unless it says otherwise.
  umask(077);
  BlockStopSignals();  // before threads start: they inherit it

  RealClock clock;  // outlives the agent below
  f.config.clock = &clock;
  if (absl::Status st = JoinIfAsked(f); !st.ok()) {
    std::cerr << "trainyard agent: " << st.message() << "\n";
    return absl::IsInvalidArgument(st) ? kExitUsage : kExitFailure;
  }
  agent::AgentOptions options;
  if (int code = AgentOptionsFrom(f, &options); code != kExitOk) return code;
  absl::StatusOr<std::unique_ptr<agent::Agent>> started = agent::Agent::Start(std::move(options));
  if (!started.ok()) {
    std::cerr << "trainyard agent: " << started.status().message() << "\n";
    return absl::IsInvalidArgument(started.status()) ? kExitUsage : kExitFailure;
  }
  agent::Agent& node = **started;
  PrintStarted(f, node);
  int sig = WaitForStopSignal();
  Log(LogLevel::kInfo, "agent", "signal %d: stopping%s", sig, f.kill_tasks_on_exit ? " and killing tasks" : "");
  node.Stop(absl::StrCat("its agent was stopped by signal ", sig), f.kill_tasks_on_exit);
  return kExitOk;
}

// How the node's tasks run: their logs, users, dirs, images and limits.
void AddTaskFlags(CLI::App* cmd, AgentFlags& f) {
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
  cmd->add_option("--task-dir-retention", f.task_dir_retention,
                  "how long a finished task's work dir stays before it is removed (its logs stay): 1h (default), "
                  "0 at once, inf never");
  cmd->add_option("--insecure-registries", f.insecure_registries,
                  "registries (HOST:PORT, comma-separated) that images are pulled from over plain HTTP or TLS "
                  "unchecked (docs/images.md); default none: every pull checks TLS");
  cmd->add_option("--task-pids-max", f.config.task_pids_max,
                  "the most processes and threads of one task at once (a pids cgroup; default 4096, 0: no limit)");
  cmd->add_option("--cgroup-root", f.config.cgroup_root,
                  "where cgroups are mounted (default /sys/fs/cgroup): the agent confines tasks in cgroups there "
                  "that it may write (v2, a delegated v2 subtree, or v1) and says at start-up which limits it "
                  "enforces; a directory without cgroups runs tasks unconfined");
}

// TLS, and joining a cluster with a token.
void AddTlsFlags(CLI::App* cmd, AgentFlags& f) {
  cmd->add_option("--ca", f.ca, "TLS: the cluster CA's certificate, which the server's must be signed by");
  cmd->add_option("--cert", f.cert,
                  "TLS: this node's certificate (`trainyard certs node NAME`); it names the node, so --name "
                  "defaults to it and may not differ");
  cmd->add_option("--key", f.key, "TLS: this node's private key (mode 0600)");
  cmd->add_option("--join-token", f.join_token,
                  "join with this token (`trainyard token create --join NODE`): the node's key is made here and its "
                  "certificate comes from the server, into --ca/--cert/--key (default DATA_DIR/tls/); once");
  cmd->add_option("--ca-pin", f.ca_pin, "with --join-token: sha256:HEX of the cluster CA, as the token's maker printed");
}

}  // namespace

void RegisterAgent(CLI::App& app, int* exit_code) {
  static AgentFlags f;
  auto* cmd = app.add_subcommand("agent", "Run the node agent");
  cmd->add_option("--server", f.server, "server address host:port");
  cmd->add_option("--agent-server", f.agent_server,
                  "the server's agent listener host:port (default: the port above --server's, as the server's "
                  "--agent-listen is by default)");
  cmd->add_option("--name", f.config.node_name, "node name (default: the host name)");
  cmd->add_option("--address", f.config.address, "address other nodes' tasks reach this node on (default: its address toward the server)");
  cmd->add_option("--rack", f.config.rack, "rack of the node");
  cmd->add_option("--data-center", f.config.data_center, "data center of the node");
  cmd->add_option("--labels", f.labels, "node labels KEY=VALUE,...");
  cmd->add_option("--data-dir", f.config.data_dir, "where task logs, work dirs and state go")->required();
  cmd->add_option("--simulate-gpus", f.config.gpu.simulate_gpus, "simulate this many GPUs");
  cmd->add_option("--gpu-topology", f.config.gpu.gpu_topology, "topology spec of simulated GPUs");
  cmd->add_option("--gpu-model", f.config.gpu.simulated_model,
                  "model of simulated GPUs, as tasks name it in gpuModel (e.g. A10, V100M32)");
  cmd->add_option("--gpu-events", f.config.gpu_events,
                  "where the GPUs' Xid events are read: a file of the driver's lines, or none (default: the kernel's "
                  "log for real GPUs, DATA_DIR/gpu-events for simulated ones)");
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
  AddTaskFlags(cmd, f);
  cmd->add_option("--http-listen", f.http_listen,
                  "serve /metrics (Prometheus) on HOST:PORT; a bare PORT is on 127.0.0.1, port 0 any free port "
                  "(default: none)");
  AddTlsFlags(cmd, f);
  cmd->add_option("--log-level", f.log_level, "debug, info, warning or error");
  cmd->callback([exit_code] { *exit_code = RunAgent(f); });
}

}  // namespace trainyard::cli
