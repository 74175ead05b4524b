// What a task takes from its agent's environment (docs/agent.md,
// "Environment"; docs/security.md, "Tasks"). The agent's environment is its
// operator's (PATH, LD_LIBRARY_PATH for CUDA, a Python's paths, proxies),
// so tasks start from it, but never with a credential or client config the
// agent holds: whoever ran the agent (`trainyard up`, a test, an admin's
// shell) may have an admin's token in it, and a task is its user's, not
// theirs. A task's Trainyard variables come from its launch only.
#pragma once

#include <string>
#include <vector>

#include "agent/task.h"

namespace trainyard::agent {

// True for a variable of the agent's that no task inherits: every
// TRAINYARD_* (TRAINYARD_TOKEN, TRAINYARD_CONFIG, TRAINYARD_CA_FILE,
// TRAINYARD_SERVER, a join token...) except TRAINYARD_EXAMPLES_BIN and
// TRAINYARD_EXAMPLES_DIR (where the example programs are: paths, no
// authority), and the variables that hand a login session's credentials to
// its children (SSH_AUTH_SOCK, KRB5CCNAME, XDG_RUNTIME_DIR,
// DBUS_SESSION_BUS_ADDRESS, GPG_AGENT_INFO).
bool WithheldFromTasks(const std::string& name);

// `agent_env` ("NAME=VALUE" entries) without what WithheldFromTasks names.
// With `run_as` (the task runs as another account) HOME, USER and LOGNAME
// are that account's (left out when it has no name or home), not the agent's.
std::vector<std::string> TaskInheritedEnvironment(const std::vector<std::string>& agent_env,
                                                  const TaskAccount* run_as);

}  // namespace trainyard::agent
