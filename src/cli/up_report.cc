// The terminal text of `trainyard up` (see up_report.h).
#include "cli/up_report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace trainyard::cli {

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "trainyard";
}

std::string FindExamplesDir(const std::string& self) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path dir : {fs::path(self).parent_path() / "examples", fs::path(TRAINYARD_SOURCE_DIR) / "examples"}) {
    if (fs::exists(dir / "hello.yaml", ec)) return fs::absolute(dir, ec).lexically_normal().string();
  }
  return "";
}

std::string FindExamplesSourceDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path dir : {fs::current_path(ec) / "examples", fs::path(TRAINYARD_SOURCE_DIR) / "examples"}) {
    if (fs::exists(dir / "pytorch_ddp" / "train.py", ec)) return fs::absolute(dir, ec).lexically_normal().string();
  }
  return "";
}

std::string BannerText(const UpBanner& b) {
  std::string out = absl::StrCat("Trainyard is up: server ", b.address, ", ", b.nodes, b.nodes == 1 ? " node" : " nodes",
                                 " x ", b.gpus, " simulated GPUs (", b.topology, "); data and logs in ", b.data_dir,
                                 "\n");
  if (!b.http_address.empty()) {
    absl::StrAppend(&out, "dashboard: http://", b.http_address, "/", b.admin_token.empty() ? "" : "#token=",
                    b.admin_token, "\n");
  }
  if (!b.http_address.empty() || !b.agent_metrics.empty()) {
    std::string line = "metrics:";
    if (!b.http_address.empty()) absl::StrAppend(&line, " http://", b.http_address, "/metrics (server)");
    for (const auto& [node, address] : b.agent_metrics) {
      if (!address.empty()) absl::StrAppend(&line, " http://", address, "/metrics (", node, ")");
    }
    absl::StrAppend(&out, line, "; Prometheus targets: ", b.data_dir, "/", kPrometheusTargetsFile, "\n");
  }
  absl::StrAppend(&out, "The admin's credential is ", b.data_dir, "/client.yaml (docs/security.md).\n");
  absl::StrAppend(&out, "Try, in another terminal (the export is needed only outside the folder of ", b.data_dir,
                  "):\n  export TRAINYARD_CONFIG=", b.data_dir, "/client.yaml\n");
  if (!b.examples_dir.empty()) {
    absl::StrAppend(&out, "  ", b.self, " submit ", b.examples_dir, "/hello.yaml --wait\n");
    absl::StrAppend(&out, "  ", b.self, " logs hello\n  ", b.self, " describe hello\n");
  }
  absl::StrAppend(&out, "  ", b.self, " jobs --all\n  ", b.self, " nodes\n  ", b.self, " queues\n");
  absl::StrAppend(&out, "Another account of this host gets its own token with:\n  ", b.self, " login --socket ", b.data_dir,
                  "/server/login.sock\n");
  absl::StrAppend(&out, b.demo ? "The demo job follows; the cluster stays up after it. " : "",
                  "Press Ctrl-C to stop the cluster.\n");
  return out;
}

absl::Status WritePrometheusTargets(const std::string& path, const std::string& server_http,
                                    const std::vector<std::pair<std::string, std::string>>& agents) {
  nlohmann::json groups = nlohmann::json::array();
  if (!server_http.empty()) {
    groups.push_back({{"targets", {server_http}}, {"labels", {{"component", "server"}}}});
  }
  nlohmann::json agent_targets = nlohmann::json::array();
  for (const auto& [node, address] : agents) {
    if (!address.empty()) agent_targets.push_back(address);
  }
  if (!agent_targets.empty()) {
    groups.push_back({{"targets", agent_targets}, {"labels", {{"component", "agent"}}}});
  }
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << groups.dump(2) << "\n";
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string LastLines(const std::string& path, int n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) absl::StrAppend(&out, l, "\n");
  return out;
}

std::string StartFailureText(const std::string& what, int status, const std::string& log) {
  std::string how = "did not become ready in time";
  if (status >= 0 && WIFEXITED(status)) how = absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (status >= 0 && WIFSIGNALED(status)) how = absl::StrCat("was killed by signal ", WTERMSIG(status));
  std::string out = absl::StrCat("trainyard up: ", what, " ", how, "; the end of ", log, ":\n");
  std::string tail = LastLines(log, 15);
  if (tail.empty()) tail = "(empty)\n";
  size_t start = 0;
  while (start < tail.size()) {
    size_t end = tail.find('\n', start);
    absl::StrAppend(&out, "  | ", tail.substr(start, end - start), "\n");
    start = end + 1;
  }
  return out;
}

}  // namespace trainyard::cli
