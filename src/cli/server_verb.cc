// `trainyard server`: runs the resource manager in the foreground until
// SIGINT / SIGTERM. `--check-store` verifies the store and exits.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/stop_signals.h"
#include "cli/verbs.h"
#include "common/logging.h"
#include "server/server.h"
#include "store/sqlite_state_store.h"

namespace trainyard::cli {
namespace {

struct ServerFlags {
  std::string config_file;
  server::ServerConfig config;  // the flags' values (over the defaults)
  bool check_store = false;
  std::string log_level = "info";
  // For each flag: copies its value into a config when it was given, so
  // flags override the file (as in every other tool) and the file overrides
  // the defaults.
  std::vector<std::function<void(server::ServerConfig& to)>> overrides;
};

// Adds option `name` bound to the field `get` picks out of f->config, and
// its override.
template <typename Get>
CLI::Option* AddConfigOption(CLI::App* cmd, ServerFlags* f, const std::string& name, Get get,
                             const std::string& help) {
  CLI::Option* opt = cmd->add_option(name, get(f->config), help);
  f->overrides.push_back([opt, get, f](server::ServerConfig& to) {
    if (opt->count() > 0) get(to) = get(f->config);
  });
  return opt;
}

// The same for a flag that sets a bool field to false (--no-X{false}).
template <typename Get>
void AddConfigFlag(CLI::App* cmd, ServerFlags* f, const std::string& name, Get get, const std::string& help) {
  CLI::Option* opt = cmd->add_flag(name, get(f->config), help);
  f->overrides.push_back([opt, get, f](server::ServerConfig& to) {
    if (opt->count() > 0) get(to) = get(f->config);
  });
}

int CheckStore(const std::string& data_dir) {
  SqliteStoreOptions opt;
  opt.read_only = true;
  opt.create_if_missing = false;
  auto store = SqliteStateStore::Open(data_dir, opt);
  if (!store.ok()) {
    std::cerr << "trainyard server --check-store: " << store.status().message() << "\n";
    return kExitFailure;
  }
  absl::Status st = (*store)->CheckIntegrity();
  if (!st.ok()) {
    std::cerr << "trainyard server --check-store: " << st.message() << "\n";
    return kExitFailure;
  }
  std::cout << "store in " << data_dir << " is consistent\n";
  return kExitOk;
}

// Waits for SIGINT or SIGTERM on a dedicated thread, then shuts down.
void ServeUntilSignal(server::Server* s) {
  BlockStopSignals();
  std::thread waiter([&] {
    int sig = WaitForStopSignal();
    Log(LogLevel::kInfo, "server", "signal %d: shutting down", sig);
    s->Shutdown();
  });
  s->Wait();
  waiter.join();
}

int RunServer(ServerFlags& f, const std::string& self) {
  LogLevel level;
  if (!ParseLogLevel(f.log_level, &level)) {
    std::cerr << "--log-level: '" << f.log_level << "' is not one of debug, info, warning, error\n";
    return kExitUsage;
  }
  SetLogLevel(level);
  server::ServerConfig config = f.config;
  if (!f.config_file.empty()) {
    auto loaded = server::LoadServerConfig(f.config_file, config);
    if (!loaded.ok()) {
      std::cerr << "trainyard server: " << loaded.status().message() << "\n";
      return kExitUsage;
    }
    config = *loaded;
    for (const auto& apply : f.overrides) apply(config);
  }
  if (f.check_store) return CheckStore(config.data_dir);
  if (config.trainyard_binary.empty()) config.trainyard_binary = self;
  // The store, its journal and the job masters' files are the server's alone.
  umask(077);
  auto s = server::Server::Start(config);
  if (!s.ok()) {
    std::cerr << "trainyard server: " << s.status().message() << "\n";
    return kExitFailure;
  }
  std::cout << "trainyard server listening on " << (*s)->address() << "\n";
  std::cout << "trainyard server agents connect to " << (*s)->agent_address() << "\n";
  if (!(*s)->http_address().empty()) {
    std::cout << "trainyard server HTTP API and /metrics on " << (*s)->http_scheme() << "://" << (*s)->http_address()
              << "/\n";
  }
  std::cout << std::flush;
  ServeUntilSignal(s->get());
  return kExitOk;
}

// Its doors (clients, agents, HTTP) and how long what they show is kept.
void AddDoorFlags(CLI::App* cmd, ServerFlags& f) {
  using C = server::ServerConfig;
  AddConfigOption(cmd, &f, "--listen", [](C& c) -> auto& { return c.listen; },
                  "host:port to serve clients on (port 0 = any free port)");
  AddConfigOption(cmd, &f, "--agent-listen", [](C& c) -> auto& { return c.agent_listen; },
                  "host:port to serve agents on, a door of their own (default: the port above --listen's; with "
                  "--tls-dir agents must present a node certificate there)");
  AddConfigOption(cmd, &f, "--cluster-servers", [](C& c) -> auto& { return c.cluster_servers; },
                  "every server's client address, comma-separated IP:port (servers on one etcd store): job masters "
                  "and tasks are given it to follow the leader (default: this server's address)");
  AddConfigOption(cmd, &f, "--http-listen", [](C& c) -> auto& { return c.http_listen; },
                  "host:port for the REST API, the dashboard and /metrics (port 0 = any free port; default: none)");
  AddConfigOption(cmd, &f, "--history-interval-ms", [](C& c) -> auto& { return c.history_interval_ms; },
                  "a sample of the cluster for the dashboard's charts every this many ms (0 = none; default 10000)");
  AddConfigOption(cmd, &f, "--task-sample-interval-ms", [](C& c) -> auto& { return c.task_sample_interval_ms; },
                  "agents sample each running task's CPU, memory and GPU use this often, for trainyard top and "
                  "the job page (0 = never; default 10000)");
  AddConfigOption(cmd, &f, "--schedule-min-interval-seconds",
                  [](C& c) -> auto& { return c.schedule_min_interval_seconds; },
                  "a schedule whose cron comes due more often than this is refused (default 60)");
  AddConfigOption(cmd, &f, "--finished-job-retention-minutes",
                  [](C& c) -> auto& { return c.finished_job_retention_minutes; },
                  "a finished job leaves describe and jobs -a this long after it ended, as a delete takes it; "
                  "trainyard history keeps it (0 = never; default 10080, a week)");
  AddConfigOption(cmd, &f, "--accounting-retention-days", [](C& c) -> auto& { return c.accounting_retention_days; },
                  "trainyard history and usage keep a finished job this many days after it ended (default 365)");
}

// Where its state is kept (SQLite, or etcd shared by several servers) and its TLS.
void AddStoreFlags(CLI::App* cmd, ServerFlags& f) {
  using C = server::ServerConfig;
  AddConfigOption(cmd, &f, "--data-dir", [](C& c) -> auto& { return c.data_dir; },
                  "this server's files (and the state store, unless --store names etcd)");
  AddConfigOption(cmd, &f, "--store", [](C& c) -> auto& { return c.store; },
                  "etcd://host:port,... (etcds:// for TLS): keep the state in etcd, shared by several servers of "
                  "which one leads (docs/deploy.md); default: SQLite in --data-dir");
  AddConfigOption(cmd, &f, "--etcd-prefix", [](C& c) -> auto& { return c.etcd_prefix; },
                  "the etcd keys of this cluster start with this (default /trainyard/)");
  AddConfigOption(cmd, &f, "--etcd-ca", [](C& c) -> auto& { return c.etcd_ca_file; },
                  "TLS to etcd: the CA of its members' certificates (PEM)");
  AddConfigOption(cmd, &f, "--etcd-cert", [](C& c) -> auto& { return c.etcd_cert_file; },
                  "TLS to etcd: this server's client certificate (PEM)");
  AddConfigOption(cmd, &f, "--etcd-key", [](C& c) -> auto& { return c.etcd_key_file; },
                  "TLS to etcd: the client certificate's key (PEM)");
  AddConfigOption(cmd, &f, "--etcd-max-txn-ops", [](C& c) -> auto& { return c.etcd_max_txn_ops; },
                  "etcd's --max-txn-ops (default 128): keys one store transaction may hold");
  AddConfigOption(cmd, &f, "--etcd-max-request-bytes", [](C& c) -> auto& { return c.etcd_max_request_bytes; },
                  "etcd's --max-request-bytes (default 1572864): bytes one store transaction may hold");
  AddConfigOption(cmd, &f, "--leader-lease-ms", [](C& c) -> auto& { return c.leader_lease_ms; },
                  "with an etcd store: a standby takes over this long after the leader stopped renewing (default "
                  "2000)");
  AddConfigOption(cmd, &f, "--http-tls", [](C& c) -> auto& { return c.http_tls; },
                  "HTTPS on --http-listen with --tls-dir's server certificate: auto (when --tls-dir is set and the "
                  "listener is not loopback), on, off");
  AddConfigOption(cmd, &f, "--login-socket", [](C& c) -> auto& { return c.login_socket; },
                  "Unix socket where local users get a token for their account (default DATA_DIR/login.sock; off: none)");
  AddConfigOption(cmd, &f, "--tls-dir", [](C& c) -> auto& { return c.tls_dir; },
                  "certificate directory (`trainyard certs init`): the TCP listener serves TLS with its server.crt "
                  "and agents must present a node certificate of its ca.crt (default: plaintext)");
}

// What one user or peer may take of it.
void AddLimitFlags(CLI::App* cmd, ServerFlags& f) {
  using C = server::ServerConfig;
  AddConfigOption(cmd, &f, "--max-pending-jobs-per-user", [](C& c) -> auto& { return c.max_pending_jobs_per_user; },
                  "jobs one user may have waiting to start (0 = no limit)");
  AddConfigOption(cmd, &f, "--max-submissions-per-second-per-user",
                  [](C& c) -> auto& { return c.max_submissions_per_second_per_user; },
                  "submissions one user may make a second (0 = no limit)");
  AddConfigOption(cmd, &f, "--max-open-files", [](C& c) -> auto& { return c.max_open_files; },
                  "open-file limit to raise to (default: the hard limit)");
  AddConfigOption(cmd, &f, "--max-connections", [](C& c) -> auto& { return c.max_connections; },
                  "open gRPC connections, all peers together (default: the open-file limit less an eighth)");
  AddConfigOption(cmd, &f, "--max-connections-per-peer", [](C& c) -> auto& { return c.max_connections_per_peer; },
                  "open gRPC connections from one IP address, an IPv6 /64 (default: an eighth of --max-connections)");
  AddConfigOption(cmd, &f, "--max-agent-connections", [](C& c) -> auto& { return c.max_agent_connections; },
                  "open connections to the agent listener (default: an eighth of what the open-file limit allows, "
                  "at least 64)");
  AddConfigOption(cmd, &f, "--max-agent-connections-per-peer",
                  [](C& c) -> auto& { return c.max_agent_connections_per_peer; },
                  "open connections to the agent listener from one IP address (default: --max-agent-connections)");
  AddConfigOption(cmd, &f, "--unauthenticated-grace-ms", [](C& c) -> auto& { return c.unauthenticated_grace_ms; },
                  "a connection without an authenticated call this long after it opened is the first shut down "
                  "when a cap is reached (0 = never; default 5000)");
}

// Queues, node liveness, kills, preemption and placement.
void AddSchedulingFlags(CLI::App* cmd, ServerFlags& f) {
  using C = server::ServerConfig;
  AddConfigOption(cmd, &f, "--queue-config", [](C& c) -> auto& { return c.queue_config; },
                  "YAML file with the queue tree (docs/queues.md)");
  AddConfigOption(cmd, &f, "--queue-policy", [](C& c) -> auto& { return c.queue_policy; }, "fifo, capacity or fair");
  AddConfigOption(cmd, &f, "--default-queue", [](C& c) -> auto& { return c.default_queue; },
                  "queue of jobs that name none (default: the queue config's defaultQueue, else \"default\")");
  AddConfigOption(cmd, &f, "--node-timeout-ms", [](C& c) -> auto& { return c.node_timeout_ms; },
                  "missed heartbeats before a node is lost");
  AddConfigOption(cmd, &f, "--heartbeat-interval-ms", [](C& c) -> auto& { return c.heartbeat_interval_ms; },
                  "what agents are told");
  AddConfigOption(cmd, &f, "--quiet-heartbeat-interval-ms",
                  [](C& c) -> auto& { return c.quiet_heartbeat_interval_ms; },
                  "how long an agent with nothing new may go between beats (at most a quarter of the node "
                  "timeout; 0 = every beat; default 2500)");
  AddConfigOption(cmd, &f, "--kill-grace-ms", [](C& c) -> auto& { return c.kill_grace_ms; }, "SIGTERM to SIGKILL");
  AddConfigOption(cmd, &f, "--preemption-grace-ms", [](C& c) -> auto& { return c.preemption_grace_ms; },
                  "time victims get to checkpoint");
  AddConfigOption(cmd, &f, "--preemption-min-runtime-ms",
                  [](C& c) -> auto& { return c.preemption_min_runtime_ms; },
                  "a job that started less than this ago is not preempted (0 = off)");
  AddConfigOption(cmd, &f, "--elastic-grow-after-ms", [](C& c) -> auto& { return c.elastic_grow_after_ms; },
                  "an elastic job grows into new room only once it ran this long at its size (default 30000)");
  AddConfigOption(cmd, &f, "--port-quarantine-ms", [](C& c) -> auto& { return c.port_quarantine_ms; },
                  "how long a port a task left is not given again by count");
  AddConfigOption(cmd, &f, "--checkpoint-root", [](C& c) -> auto& { return c.checkpoint_root; },
                  "checkpoint directory shared by the nodes (default DATA_DIR/checkpoints)");
  AddConfigOption(cmd, &f, "--max-gpus", [](C& c) -> auto& { return c.limits.max_gpus; }, "maximum GPUs per task");
  AddConfigOption(cmd, &f, "--node-launch-faults-to-degrade",
                  [](C& c) -> auto& { return c.node_launch_faults_to_degrade; },
                  "launches a node's agent refuses in a row before the node is taken out of placement");
  AddConfigOption(cmd, &f, "--min-node-free-disk-mb", [](C& c) -> auto& { return c.min_node_free_disk_mb; },
                  "a node with less free disk in its agent's data dir takes no new tasks");
}

}  // namespace

void RegisterServer(CLI::App& app, int* exit_code) {
  static ServerFlags f;
  auto* cmd = app.add_subcommand("server", "Run the resource manager (gRPC for clients and agents)");
  cmd->add_option("--config", f.config_file, "YAML config file (the flags given override its keys)");
  AddDoorFlags(cmd, f);
  AddStoreFlags(cmd, f);
  AddLimitFlags(cmd, f);
  AddSchedulingFlags(cmd, f);
  using C = server::ServerConfig;
  AddConfigFlag(cmd, &f, "--no-jobmaster{false}", [](C& c) -> auto& { return c.jobmaster_enabled; },
                "do not start a job master per job");
  AddConfigFlag(cmd, &f, "--no-group-commit{false}", [](C& c) -> auto& { return c.store_group_commit; },
                "one store transaction per write (slower; for comparison)");
  AddConfigFlag(cmd, &f, "--no-auth{false}", [](C& c) -> auto& { return c.authentication; },
                "accept client calls without a token, every caller an admin (only to compare; never on a real "
                "cluster)");
  cmd->add_flag("--check-store", f.check_store, "verify the store's integrity and exit");
  cmd->add_option("--log-level", f.log_level, "debug, info, warning or error");
  cmd->callback([exit_code] {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    *exit_code = RunServer(f, n > 0 ? std::string(self, n) : "trainyard");
  });
}

}  // namespace trainyard::cli
