// What a task inherits from its agent (see task_inherited_env.h).
#include "agent/task_inherited_env.h"

#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trainyard::agent {

bool WithheldFromTasks(const std::string& name) {
  if (absl::StartsWith(name, "TRAINYARD_")) {
    return name != "TRAINYARD_EXAMPLES_BIN" && name != "TRAINYARD_EXAMPLES_DIR";
  }
  static constexpr std::array<const char*, 5> kSession = {"SSH_AUTH_SOCK", "KRB5CCNAME", "XDG_RUNTIME_DIR",
                                                          "DBUS_SESSION_BUS_ADDRESS", "GPG_AGENT_INFO"};
  for (const char* s : kSession) {
    if (name == s) return true;
  }
  return false;
}

std::vector<std::string> TaskInheritedEnvironment(const std::vector<std::string>& agent_env,
                                                  const TaskAccount* run_as) {
  std::vector<std::string> out;
  out.reserve(agent_env.size() + 3);
  for (const std::string& entry : agent_env) {
    std::string name = entry.substr(0, entry.find('='));
    if (WithheldFromTasks(name)) continue;
    if (run_as != nullptr && (name == "HOME" || name == "USER" || name == "LOGNAME")) continue;
    out.push_back(entry);
  }
  if (run_as != nullptr) {
    if (!run_as->home.empty()) out.push_back(absl::StrCat("HOME=", run_as->home));
    if (!run_as->name.empty()) {
      out.push_back(absl::StrCat("USER=", run_as->name));
      out.push_back(absl::StrCat("LOGNAME=", run_as->name));
    }
  }
  return out;
}

}  // namespace trainyard::agent
