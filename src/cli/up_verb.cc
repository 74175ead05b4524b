// `trainyard up`: a whole local cluster in one process tree.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterUp(CLI::App& app, int* exit_code) {
  auto* up = app.add_subcommand("up", "Start a local cluster (server + agents with simulated GPUs)");
  static bool demo = false;
  up->add_flag("--demo", demo, "Also submit the demo job and follow it to the end");
  up->callback([exit_code] {
    std::cerr << "trainyard up: the local cluster arrives with the control plane (server and "
                 "agents), which is not built yet. `trainyard sim` and the scheduler core work "
                 "today.\n";
    *exit_code = kExitFailure;
  });
}

}  // namespace trainyard::cli
