// The client config file (see client_config.h).
#include "security/client_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "security/files.h"
#include "yaml-cpp/yaml.h"

namespace trainyard::security {

absl::StatusOr<ClientConfig> LoadClientConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  ClientConfig out;
  out.path = path;
  try {
    YAML::Node root = YAML::Load(*text);
    if (root.IsNull()) return out;
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": expected keys server, token and caFile"));
    }
    for (const auto& kv : root) {
      std::string key = kv.first.as<std::string>();
      if (key != "server" && key != "token" && key != "caFile") {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", kv.first.Mark().line + 1, ": unknown key \"", key,
                                                       "\"; known keys: server, token, caFile"));
      }
      if (!kv.second.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", kv.second.Mark().line + 1, ": ", key, ": expected a string"));
      }
      if (key == "caFile") {
        std::filesystem::path ca(kv.second.Scalar());
        if (!ca.empty() && ca.is_relative()) ca = std::filesystem::path(path).parent_path() / ca;
        out.ca_file = ca.string();
        continue;
      }
      (key == "server" ? out.server : out.token) = kv.second.Scalar();
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  return out;
}

absl::StatusOr<ClientConfig> FindClientConfig() {
  if (const char* env = std::getenv("TRAINYARD_CONFIG"); env != nullptr && *env != '\0') {
    absl::StatusOr<ClientConfig> c = LoadClientConfig(env);
    if (!c.ok() && absl::IsNotFound(c.status())) {
      return absl::NotFoundError(absl::StrCat("TRAINYARD_CONFIG names ", env, ", which does not exist"));
    }
    return c;
  }
  std::vector<std::string> places = {".trainyard/client.yaml"};
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    places.push_back(absl::StrCat(home, "/.config/trainyard/client.yaml"));
  }
  for (const std::string& p : places) {
    // The config names the server a token goes to: one that another
    // account wrote (in a shared directory, a cloned repository) or may
    // change is not taken.
    struct stat st;
    if (stat(p.c_str(), &st) == 0 && (st.st_uid != geteuid() || (st.st_mode & 022) != 0)) {
      return absl::PermissionDeniedError(absl::StrCat(
          p, " is not used: it belongs to uid ", st.st_uid, ", not to you (uid ", geteuid(),
          "), or others may change it (mode ", absl::StrFormat("%04o", st.st_mode & 07777),
          "); set TRAINYARD_CONFIG to a config of your own"));
    }
    absl::StatusOr<ClientConfig> c = LoadClientConfig(p);
    if (c.ok() || !absl::IsNotFound(c.status())) return c;
  }
  return ClientConfig();
}

absl::Status WriteClientConfig(const std::string& path, const ClientConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "server" << YAML::Value << config.server << YAML::Key << "token"
      << YAML::Value << config.token;
  if (!config.ca_file.empty()) out << YAML::Key << "caFile" << YAML::Value << config.ca_file;
  out << YAML::EndMap;
  return WritePrivateFile(path, absl::StrCat("# Trainyard client config: the server and your token (keep it secret)\n",
                                             out.c_str(), "\n"));
}

}  // namespace trainyard::security
