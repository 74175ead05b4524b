// What `trainyard up` tells the terminal: the banner of next steps (commands
// that work as printed, with absolute paths) and, when a daemon of the
// cluster fails to start, the last lines of its log.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace trainyard::cli {

// This binary's real path (/proc/self/exe), so printed commands run it
// whatever the working directory; "trainyard" when it cannot be read.
std::string SelfPath();

// The cluster `up` started, as the banner describes it.
struct UpBanner {
  std::string self;          // this binary's real path (/proc/self/exe)
  std::string address;       // the server's host:port
  std::string data_dir;      // absolute
  int nodes = 0;
  int gpus = 0;
  std::string topology;      // each node's topology spec
  std::string examples_dir;  // absolute; "" when no example spec is found
  bool demo = false;
  std::string http_address;  // host:port of the dashboard and REST API; "" = none
  std::string admin_token;   // in the dashboard's URL (its fragment: never sent to the server)
  // Each agent's /metrics: its node's name and host:port ("" = none found).
  std::vector<std::pair<std::string, std::string>> agent_metrics;
};

// The name of the Prometheus targets file `up` writes in its data dir.
inline constexpr const char* kPrometheusTargetsFile = "prometheus-targets.json";

// Writes `path` in Prometheus' file_sd format: the server's HTTP address
// (label component="server") and each agent's /metrics address
// (component="agent"); an agent without one is left out. Written whole to a
// temporary and renamed, as Prometheus reads the file again when it changes.
absl::Status WritePrometheusTargets(const std::string& path, const std::string& server_http,
                                    const std::vector<std::pair<std::string, std::string>>& agents);

// The folder of example specs that exists: the build's copy beside `self`
// (absolute paths inside, e.g. build/release/examples), else the source
// tree's; "" when neither has hello.yaml.
std::string FindExamplesDir(const std::string& self);

// The source tree's examples/ folder (the one with pytorch_ddp/train.py, which
// the specs reach through TRAINYARD_EXAMPLES_DIR): ./examples when the
// current directory is a checkout (the README's instructions run from it),
// else the tree this binary was built from; "" when neither has it.
std::string FindExamplesSourceDir();

// The banner, one command per line, each runnable as printed.
std::string BannerText(const UpBanner& b);

// The whole file at `path` ("" when it cannot be read).
std::string ReadFileText(const std::string& path);

// The last `n` lines of the file at `path` ("" when it cannot be read).
std::string LastLines(const std::string& path, int n);

// Why `what` (e.g. "agent node-1") did not come up, for the terminal: its
// exit (`status` from waitpid; -1 when it still runs) and the last lines of
// its `log`, each indented.
std::string StartFailureText(const std::string& what, int status, const std::string& log);

}  // namespace trainyard::cli
