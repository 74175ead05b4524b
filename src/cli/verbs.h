// The verbs of the `trainyard` command. Each Register* adds its subcommand(s)
// to the app; the callback it installs runs the verb and sets *exit_code.
#pragma once

namespace CLI {
class App;
}

namespace trainyard::cli {

// Exit codes a script can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // the operation failed
inline constexpr int kExitUsage = 2;        // bad command line or input
inline constexpr int kExitUnavailable = 3;  // server not reachable

void RegisterUp(CLI::App& app, int* exit_code);
void RegisterSim(CLI::App& app, int* exit_code);
void RegisterJobmaster(CLI::App& app, int* exit_code);
void RegisterWorker(CLI::App& app, int* exit_code);
// rsh (rsh_verb.cc): Open MPI's rsh agent in an MPI job's tasks
void RegisterRsh(CLI::App& app, int* exit_code);
void RegisterAgent(CLI::App& app, int* exit_code);
void RegisterServer(CLI::App& app, int* exit_code);
// admin backup, admin restore (admin_verb.cc)
void RegisterAdmin(CLI::App& app, int* exit_code);
// certs init, certs node (certs_verb.cc)
void RegisterCerts(CLI::App& app, int* exit_code);
// submit, jobs, describe, kill, delete, queues; and logs (RegisterLogs) and the
// node verbs (RegisterNodeVerbs, verb_common.h)
void RegisterClientVerbs(CLI::App& app, int* exit_code);
// logs (logs_verb.cc), registered by RegisterClientVerbs
void RegisterLogs(CLI::App& app, int* exit_code);

}  // namespace trainyard::cli
