// Entry point of the `trainyard` binary: parses the command line and hands it
// to the verb.
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "cli/verbs.h"
#include "common/version.h"

int main(int argc, char** argv) {
  // gRPC locks absl mutexes on every message; the library's deadlock
  // detection (a lock graph kept per acquisition) is a debugging aid that
  // costs a few percent of a core under load, so it is off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"Trainyard: a GPU cluster manager for distributed deep-learning training"};
  app.set_version_flag("--version", std::string("trainyard ") + trainyard::kVersion);
  app.require_subcommand(0, 1);
  int exit_code = trainyard::cli::kExitOk;
  trainyard::cli::RegisterUp(app, &exit_code);
  trainyard::cli::RegisterServer(app, &exit_code);
  trainyard::cli::RegisterCerts(app, &exit_code);
  trainyard::cli::RegisterAdmin(app, &exit_code);
  trainyard::cli::RegisterAgent(app, &exit_code);
  trainyard::cli::RegisterJobmaster(app, &exit_code);
  trainyard::cli::RegisterWorker(app, &exit_code);
  trainyard::cli::RegisterRsh(app, &exit_code);
  trainyard::cli::RegisterClientVerbs(app, &exit_code);
  trainyard::cli::RegisterSim(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : trainyard::cli::kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    std::cout << app.help();
    return trainyard::cli::kExitOk;
  }
  return exit_code;
}
