// `trainyard login --socket PATH`: a local user's token from the server's
// login socket (server/login_socket.h), written into their client config.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "cli/verb_common.h"
#include "security/client_config.h"
#include "security/files.h"

namespace trainyard::cli {
namespace {

struct LoginFlags {
  std::string socket;
  std::string write_config;  // "" = $TRAINYARD_CONFIG, else ~/.config/trainyard/client.yaml
};

// The socket's whole answer; an error names the socket.
absl::StatusOr<std::string> Ask(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return absl::InvalidArgumentError("--socket: the path is too long");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string why = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot reach the login socket ", path, ": ", why,
                                               " (is the server running with this data dir?)"));
  }
  std::string answer;
  char buf[1024];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0 && answer.size() < 65536;) answer.append(buf, n);
  close(fd);
  return answer;
}

std::string DefaultConfigPath() {
  if (const char* c = std::getenv("TRAINYARD_CONFIG"); c != nullptr && *c != '\0') return c;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr && *home != '\0' ? home : ".", "/.config/trainyard/client.yaml");
}

int Login(const LoginFlags& f) {
  absl::StatusOr<std::string> answer = Ask(f.socket);
  if (!answer.ok()) {
    std::cerr << "trainyard login: " << answer.status().message() << "\n";
    return kExitUnavailable;
  }
  security::ClientConfig config;
  std::string user;
  // "ca" starts the cluster CA's certificate, which runs to the end.
  std::string ca_pem;
  if (size_t ca = answer->find("\nca\n"); ca != std::string::npos) {
    ca_pem = answer->substr(ca + 4);
    answer->resize(ca + 1);
  }
  for (absl::string_view line : absl::StrSplit(*answer, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "error ")) {
      std::cerr << "trainyard login: the server refused: " << line << "\n";
      return kExitFailure;
    }
    if (absl::ConsumePrefix(&line, "server ")) config.server = std::string(line);
    if (absl::ConsumePrefix(&line, "token ")) config.token = std::string(line);
    if (absl::ConsumePrefix(&line, "user ")) user = std::string(line);
  }
  if (config.server.empty() || config.token.empty()) {
    std::cerr << "trainyard login: " << f.socket << " gave no token (is it a Trainyard login socket?)\n";
    return kExitFailure;
  }
  std::string path = f.write_config.empty() ? DefaultConfigPath() : f.write_config;
  if (!ca_pem.empty()) {
    // Beside the config: the CLI verifies the server with it (caFile).
    config.ca_file = std::filesystem::absolute(std::filesystem::path(path).parent_path() / "ca.crt").string();
    if (absl::Status st = security::WritePrivateFile(config.ca_file, ca_pem); !st.ok()) {
      std::cerr << "trainyard login: " << st.message() << "\n";
      return kExitFailure;
    }
  }
  if (absl::Status st = security::WriteClientConfig(path, config); !st.ok()) {
    std::cerr << "trainyard login: " << st.message() << "\n";
    return kExitFailure;
  }
  std::cout << "logged in as " << user << " on " << config.server << "; client config written to " << path << "\n";
  return kExitOk;
}

}  // namespace

void RegisterLoginVerb(CLI::App& app, int* exit_code) {
  static LoginFlags f;
  auto* cmd = app.add_subcommand(
      "login", "Get a token for your own account from the server's login socket (on the server's host)");
  cmd->add_option("--socket", f.socket, "the server's login socket (DATA_DIR/login.sock)")->required();
  cmd->add_option("--write-config", f.write_config,
                  "client config to write (default: $TRAINYARD_CONFIG, else ~/.config/trainyard/client.yaml)");
  cmd->callback([exit_code] { *exit_code = Login(f); });
}

}  // namespace trainyard::cli
