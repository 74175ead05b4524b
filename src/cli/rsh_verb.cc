// `trainyard rsh HOST COMMAND...`: the rsh agent of Open MPI's mpirun in the
// tasks of a `framework: mpi` job (OMPI_MCA_plm_rsh_agent, api/task_env.h),
// so mpirun starts its daemons through Trainyard and never through ssh keys
// a user would have to set up. A HOST that is this task's own node (its
// TRAINYARD_NODE_ADDRESS or TRAINYARD_NODE) runs COMMAND here, as rsh's
// remote shell would (the words joined, run by /bin/sh): a child of the task,
// so in its allocation (cgroup, user, no_new_privs) and stopped with it. A
// rank on another node is refused with the reason: Trainyard does not yet
// start a command inside another node's task (docs/examples.md).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "cli/verb_common.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

struct RshFlags {
  std::string host;
  std::vector<std::string> command;
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v == nullptr ? fallback : v;
}

int RunRsh(const RshFlags& f) {
  std::string address = EnvOr("TRAINYARD_NODE_ADDRESS", "");
  std::string node = EnvOr("TRAINYARD_NODE", "");
  if (address.empty() && node.empty()) {
    std::cerr << "trainyard rsh: not in a Trainyard task (TRAINYARD_NODE_ADDRESS is not set)\n";
    return 255;
  }
  if (f.host != address && f.host != node) {
    std::cerr << "trainyard rsh: " << f.host << " is not this task's node (" << node << ", " << address
              << "): starting processes on another node of the job is not supported yet; run the job's ranks "
                 "on one node (docs/examples.md)\n";
    return 255;
  }
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
  cmd->add_option("host", f.host, "the node (its address or name)")->required();
  // COMMAND's words are its own, options included: not parsed here.
  cmd->prefix_command();
  cmd->footer("COMMAND...: run by /bin/sh on HOST, its words joined by spaces, as rsh does");
  cmd->callback([cmd, exit_code] {
    f.command = cmd->remaining();
    if (f.command.empty()) {
      std::cerr << "trainyard rsh: no COMMAND after HOST\n";
      *exit_code = kExitUsage;
      return;
    }
    *exit_code = RunRsh(f);
  });
}

}  // namespace trainyard::cli
