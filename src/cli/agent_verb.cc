// `trainyard agent`.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterAgent(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("agent", "Run the node agent");
  cmd->allow_extras();
  cmd->callback([exit_code] {
    std::cerr << "trainyard agent: the node agent is not built yet.\n";
    *exit_code = kExitFailure;
  });
}

}  // namespace trainyard::cli
