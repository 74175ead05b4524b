// `trainyard jobmaster`.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterJobmaster(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("jobmaster", "Run the master of one job");
  cmd->allow_extras();
  cmd->callback([exit_code] {
    std::cerr << "trainyard jobmaster: the job master is not built yet.\n";
    *exit_code = kExitFailure;
  });
}

}  // namespace trainyard::cli
