// The client verbs: submit, jobs, describe, kill, logs, nodes, queues.
#include "CLI/CLI.hpp"
#include "cli/verbs.h"

namespace trainyard::cli {

void RegisterClientVerbs(CLI::App& app, int* exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace trainyard::cli
