// `trainyard server`.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterServer(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("server", "Run the resource manager");
  cmd->allow_extras();
  cmd->callback([exit_code] {
    std::cerr << "trainyard server: the server is not built yet.\n";
    *exit_code = kExitFailure;
  });
}

}  // namespace trainyard::cli
