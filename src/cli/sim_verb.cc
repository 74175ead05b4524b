// `trainyard sim`.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterSim(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("sim", "Replay a cluster trace through the scheduler core and report");
  cmd->allow_extras();
  cmd->callback([exit_code] {
    std::cerr << "trainyard sim: the simulator arrives with the scheduler core.\n";
    *exit_code = kExitFailure;
  });
}

}  // namespace trainyard::cli
