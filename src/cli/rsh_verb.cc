// `trainyard rsh`: Open MPI's rsh agent in the tasks of a `framework: mpi`
// job (OMPI_MCA_plm_rsh_agent, api/task_env.h), so mpirun starts its daemons
// through Trainyard and never through ssh keys a user would have to set up.
// `trainyard rsh HOST COMMAND...` runs COMMAND as rsh's remote shell would
// (its words joined, run by /bin/sh): here, a child of this task, when HOST
// is this task's node (its TRAINYARD_NODE_ADDRESS or TRAINYARD_NODE); else in
// HOST's worker task, through its rank host. `trainyard rsh --serve` is that
// rank host: the command of an MPI job's workers (jobmaster/client/rank_host.h).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/task_env.h"
#include "jobmaster/client/rank_host.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

struct RshFlags {
  bool serve = false;
  std::string host;
  std::vector<std::string> command;
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v == nullptr ? fallback : v;
}

int Serve() {
  std::string address = EnvOr(kNodeAddressEnv, "");
  std::string ports = EnvOr(kPortsEnv, "");
  std::string secret = EnvOr(kJobSecretEnv, "");
  int port = 0;
  if (address.empty() || secret.empty() || !absl::SimpleAtoi(ports.substr(0, ports.find(',')), &port)) {
    std::cerr << "trainyard rsh --serve: run it as the worker of an MPI job (it needs TRAINYARD_NODE_ADDRESS, a port "
                 "in TRAINYARD_PORTS and TRAINYARD_JOB_SECRET)\n";
    return kExitUsage;
  }
  absl::Status st = jobmaster::ServeRankHost({.address = address, .port = port, .secret = secret});
  std::cerr << "trainyard rsh --serve: " << st.message() << "\n";
  return kExitFailure;
}

int Remote(const RshFlags& f) {
  std::ifstream in(EnvOr(kMpiRankHostsEnv, "/nonexistent"));
  std::stringstream hosts;
  hosts << in.rdbuf();
  absl::StatusOr<int> port = jobmaster::RankHostPort(hosts.str(), f.host);
  absl::StatusOr<int> code =
      port.ok() ? jobmaster::RunOnRankHost(f.host, *port, EnvOr(kJobSecretEnv, ""), f.command, absl::Seconds(60))
                : port.status();
  if (code.ok()) return *code;
  std::cerr << "trainyard rsh: " << code.status().message() << "\n";
  return 255;
}

int RunRsh(const RshFlags& f) {
  std::string address = EnvOr(kNodeAddressEnv, "");
  std::string node = EnvOr(kNodeEnv, "");
  if (address.empty() && node.empty()) {
    std::cerr << "trainyard rsh: not in a Trainyard task (TRAINYARD_NODE_ADDRESS is not set)\n";
    return 255;
  }
  if (f.host != address && f.host != node) return Remote(f);
  std::string line = absl::StrJoin(f.command, " ");
  execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
  std::cerr << "trainyard rsh: cannot run /bin/sh: " << strerror(errno) << "\n";
  return 255;
}

}  // namespace

void RegisterRsh(CLI::App& app, int* exit_code) {
  static RshFlags f;
  auto* cmd = app.add_subcommand(
      "rsh", "Open MPI's rsh agent in an MPI job's task (OMPI_MCA_plm_rsh_agent): run COMMAND on HOST");
  cmd->add_flag("--serve", f.serve, "serve as this MPI worker's rank host (the workers' command)");
  cmd->add_option("host", f.host, "the node (its address or name)");
  // COMMAND's words are its own, options included: not parsed here.
  cmd->prefix_command();
  cmd->footer("COMMAND...: run by /bin/sh on HOST, inside the job's task there, its words joined by spaces");
  cmd->callback([cmd, exit_code] {
    if (f.serve) {
      *exit_code = Serve();
      return;
    }
    f.command = cmd->remaining();
    if (f.host.empty() || f.command.empty()) {
      std::cerr << "trainyard rsh: HOST COMMAND... expected (or --serve)\n";
      *exit_code = kExitUsage;
      return;
    }
    *exit_code = RunRsh(f);
  });
}

}  // namespace trainyard::cli
