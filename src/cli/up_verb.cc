// `trainyard up`: a whole local cluster in one process tree — a server and N
// agents with simulated GPUs, data under ./.trainyard/ — in the foreground,
// until Ctrl-C. `--demo` also submits the demo job and follows it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/client.h"
#include "cli/demo.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

struct UpFlags {
  int nodes = 2;
  int gpus = 8;
  std::string topology = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7";
  std::string data_dir = ".trainyard";
  int port = 7450;
  bool demo = false;
  std::string demo_spec;
  int64_t node_memory_mb = 65536;
  int64_t node_vcores = 32;
};

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "trainyard";
}

// Starts `args` as a child in its own process group (so the terminal's
// Ctrl-C reaches only `up`, which stops the children in order).
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    FILE* f = freopen(log.c_str(), "a", stderr);
    (void)f;
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

void StopChild(pid_t pid, int seconds) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  absl::Time deadline = absl::Now() + absl::Seconds(seconds);
  while (absl::Now() < deadline) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Waits until `want` nodes are READY; false on timeout or a dead child.
bool WaitForNodes(const std::string& address, int want, const std::vector<pid_t>& children) {
  auto stub = MakeStub(address);
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && !g_stop) {
    for (pid_t p : children) {
      if (waitpid(p, nullptr, WNOHANG) == p) return false;
    }
    v1::ListNodesResponse resp;
    auto ctx = Context(2);
    if (stub->ListNodes(ctx.get(), v1::ListNodesRequest(), &resp).ok()) {
      int ready = 0;
      for (const auto& n : resp.nodes()) ready += n.info().state() == v1::NODE_READY;
      if (ready >= want) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int RunUp(UpFlags& f) {
  std::string self = SelfPath();
  std::string address = absl::StrCat("127.0.0.1:", f.port);
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir + "/logs", ec);
  if (ec) {
    std::cerr << "trainyard up: cannot create " << f.data_dir << ": " << ec.message() << "\n";
    return kExitFailure;
  }
  std::string root = std::filesystem::absolute(f.data_dir).string();
  // Example programs sit beside the binary; the demo's tasks find them here.
  std::string examples = std::filesystem::path(self).parent_path().string() + "/examples";
  if (!getenv("TRAINYARD_EXAMPLES_BIN")) setenv("TRAINYARD_EXAMPLES_BIN", examples.c_str(), 1);
  if (f.demo_spec.empty() && std::filesystem::exists(examples + "/demo.yaml")) f.demo_spec = examples + "/demo.yaml";
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  pid_t server = Spawn({self, "server", "--listen", address, "--data-dir", root + "/server",
                        "--node-timeout-ms", "5000", "--kill-grace-ms", "3000", "--checkpoint-root",
                        root + "/checkpoints"},
                       root + "/logs/server.log");
  std::vector<pid_t> agents;
  for (int i = 0; i < f.nodes; ++i) {
    std::string name = absl::StrCat("node-", i);
    agents.push_back(Spawn({self, "agent", "--server", address, "--name", name, "--data-dir", root + "/" + name,
                            "--simulate-gpus", absl::StrCat(f.gpus), "--gpu-topology", f.topology,
                            "--memory-mb", absl::StrCat(f.node_memory_mb), "--vcores", absl::StrCat(f.node_vcores),
                            "--rack", absl::StrCat("rack-", i / 4), "--address", "127.0.0.1", "--kill-tasks-on-exit"},
                           absl::StrCat(root, "/logs/", name, ".log")));
  }
  std::vector<pid_t> all = agents;
  all.push_back(server);
  int rc = kExitOk;
  if (!WaitForNodes(address, f.nodes, all)) {
    std::cerr << "trainyard up: the cluster did not come up; see " << root << "/logs/\n";
    rc = kExitFailure;
  } else {
    std::cout << "Trainyard is up: server " << address << ", " << f.nodes << " nodes x " << f.gpus
              << " simulated GPUs; data and logs in " << root << "\n"
              << "  export TRAINYARD_SERVER=" << address << "\n"
              << "  trainyard submit examples/hello.yaml --wait\n"
              << "  trainyard jobs | describe JOB | logs JOB | nodes | queues\n"
              << "Press Ctrl-C to stop the cluster." << std::endl;
    if (f.demo) {
      rc = RunDemo(address, f.demo_spec);
    } else {
      while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::cout << "stopping the cluster..." << std::endl;
  for (pid_t p : agents) StopChild(p, 10);
  StopChild(server, 10);
  return rc;
}

}  // namespace

void RegisterUp(CLI::App& app, int* exit_code) {
  static UpFlags f;
  auto* up = app.add_subcommand("up", "Start a local cluster (server + agents with simulated GPUs)");
  up->add_option("--nodes", f.nodes, "number of agents")->check(CLI::Range(1, 64));
  up->add_option("--gpus-per-node", f.gpus, "simulated GPUs per node")->check(CLI::Range(0, 64));
  up->add_option("--gpu-topology", f.topology, "topology spec of each node");
  up->add_option("--data-dir", f.data_dir, "where state and logs go");
  up->add_option("--port", f.port, "server port on 127.0.0.1");
  up->add_flag("--demo", f.demo, "also submit the demo job and follow it to the end");
  up->add_option("--demo-spec", f.demo_spec, "job spec the demo submits (default examples/demo.yaml)");
  up->callback([exit_code] { *exit_code = RunUp(f); });
}

}  // namespace trainyard::cli
