// `trainyard server`: runs the resource manager in the foreground until
// SIGINT / SIGTERM. `--check-store` verifies the store and exits.
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"
#include "common/logging.h"
#include "server/server.h"
#include "store/sqlite_state_store.h"

namespace trainyard::cli {
namespace {

struct ServerFlags {
  std::string config_file;
  server::ServerConfig config;
  bool check_store = false;
  std::string log_level = "info";
};

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
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
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
  }
  if (f.check_store) return CheckStore(config.data_dir);
  if (config.trainyard_binary.empty()) config.trainyard_binary = self;
  auto s = server::Server::Start(config);
  if (!s.ok()) {
    std::cerr << "trainyard server: " << s.status().message() << "\n";
    return kExitFailure;
  }
  std::cout << "trainyard server listening on " << (*s)->address() << std::endl;
  ServeUntilSignal(s->get());
  return kExitOk;
}

}  // namespace

void RegisterServer(CLI::App& app, int* exit_code) {
  static ServerFlags f;
  auto* cmd = app.add_subcommand("server", "Run the resource manager (gRPC for clients and agents)");
  cmd->add_option("--config", f.config_file, "YAML config file (flags given too override nothing in it)");
  cmd->add_option("--listen", f.config.listen, "host:port to serve on (port 0 = any free port)");
  cmd->add_option("--data-dir", f.config.data_dir, "where the state store lives");
  cmd->add_option("--queue-config", f.config.queue_config, "YAML file with the queue tree");
  cmd->add_option("--queue-policy", f.config.queue_policy, "fifo, capacity or fair");
  cmd->add_option("--node-timeout-ms", f.config.node_timeout_ms, "missed heartbeats before a node is lost");
  cmd->add_option("--heartbeat-interval-ms", f.config.heartbeat_interval_ms, "what agents are told");
  cmd->add_option("--kill-grace-ms", f.config.kill_grace_ms, "SIGTERM to SIGKILL");
  cmd->add_option("--preemption-grace-ms", f.config.preemption_grace_ms, "time victims get to checkpoint");
  cmd->add_option("--port-quarantine-ms", f.config.port_quarantine_ms,
                  "how long a port a task left is not given again by count");
  cmd->add_option("--checkpoint-root", f.config.checkpoint_root, "checkpoint directory shared by the nodes");
  cmd->add_option("--max-gpus", f.config.limits.max_gpus, "maximum GPUs per task");
  cmd->add_flag("--no-jobmaster{false}", f.config.jobmaster_enabled, "do not start a job master per job");
  cmd->add_flag("--no-group-commit{false}", f.config.store_group_commit,
                "one store transaction per write (slower; for comparison)");
  cmd->add_flag("--check-store", f.check_store, "verify the store's integrity and exit");
  cmd->add_option("--log-level", f.log_level, "debug, info, warning or error");
  cmd->callback([exit_code] {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    *exit_code = RunServer(f, n > 0 ? std::string(self, n) : "trainyard");
  });
}

}  // namespace trainyard::cli
