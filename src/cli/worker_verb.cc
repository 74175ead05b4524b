// `trainyard worker`.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterWorker(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("worker", "Discovery and barriers from a shell script inside a task");
  cmd->allow_extras();
  cmd->callback([exit_code] {
    std::cerr << "trainyard worker: the worker commands arrive with the job master.\n";
    *exit_code = kExitFailure;
  });
}

}  // namespace trainyard::cli
