// `trainyard up`: a whole local cluster in one process tree — a server and N
// agents with simulated GPUs, data under ./.trainyard/ — in the foreground,
// until Ctrl-C. `--demo` also submits the demo job and follows it.
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/ports_in_use.h"
#include "agent/task_user.h"
#include "cli/client.h"
#include "cli/demo.h"
#include "cli/up_report.h"
#include "cli/verbs.h"
#include "common/task_env_names.h"
#include "security/certs.h"
#include "security/client_config.h"
#include "security/files.h"
#include "security/tokens.h"
#include "core/resources/gpu_topology.h"

extern char** environ;

namespace trainyard::cli {
namespace {

struct UpFlags {
  int nodes = 2;
  int gpus = 8;
  std::string topology;      // "" = core::DefaultTopologySpec(gpus)
  std::string config;        // the server's config file
  std::string queue_config;  // the server's queue tree
  std::string data_dir = ".trainyard";
  int port = 7450;
  int http_port = 0;  // the dashboard, REST API and /metrics; 0 = a free port
  bool demo = false;
  std::string demo_spec;
  int64_t node_memory_mb = 65536;
  int64_t node_vcores = 32;
  std::string task_user_map;  // more lines for ROOT/task-users
};

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// The environment of up's daemons: up's own without a client's credential
// or config (TRAINYARD_CONFIG, which up sets for its own calls as the
// admin, TRAINYARD_TOKEN, TRAINYARD_CA_FILE, TRAINYARD_SERVER). A daemon
// needs none (each gets its keys by flags), and an agent's environment is
// where its tasks' environment starts (agent/task_inherited_env.h).
std::vector<std::string> DaemonEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (name == "TRAINYARD_CONFIG" || name == kTokenEnv || name == kCaFileEnv ||
        name == kServerEnv) {
      continue;
    }
    env.push_back(std::move(entry));
  }
  return env;
}

// Starts `args` as a child in its own process group (so the terminal's
// Ctrl-C reaches only `up`, which stops the children in order), with
// DaemonEnvironment().
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> env = DaemonEnvironment();
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    // The daemons' logs are theirs alone (docs/security.md, data at rest).
    umask(077);
    chmod(log.c_str(), 0600);
    FILE* f = freopen(log.c_str(), "a", stderr);
    (void)f;
    execve(argv[0], argv.data(), envp.data());
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

// The address of simulated node i. Linux routes all of 127.0.0.0/8 to the
// loopback device, so each node gets an address of its own (127.0.0.1 is
// left to the server) and a task's host:port names one node's task only.
std::string NodeAddress(int i) { return absl::StrCat("127.0.0.", i + 2); }

// The default serving range of this host cut into `parts` disjoint slices,
// one per simulated node. All nodes share one host's port space: a task
// bound to the wildcard address (a parameter server on 0.0.0.0, PyTorch's
// store) takes its port on every loopback address, so nodes that each
// allocated from the whole range would hand out the same port twice.
std::vector<core::PortRanges> NodePortSlices(int parts) {
  absl::StatusOr<core::PortRanges> ephemeral = agent::ReadEphemeralPortRange();
  core::PortRanges rest = core::DefaultServingPorts(ephemeral.ok() ? *ephemeral : core::PortRanges());
  uint32_t each = rest.Count() / static_cast<uint32_t>(parts);
  std::vector<core::PortRanges> out;
  for (int i = 0; i < parts; ++i) {
    std::optional<core::PortRanges> slice = rest.TakeLowest(each);
    out.push_back(slice.value_or(core::PortRanges()));
    rest = rest.Subtract(out.back());
  }
  return out;
}

// How the wait for the cluster ended: every node READY, a child ended
// (`dead` its pid, `status` its wait status), or the time ran out (`dead`
// -1; `ready` the nodes READY at the last look, `server_answered` whether
// the server answered at all).
struct WaitResult {
  bool up = false;
  pid_t dead = -1;
  int status = -1;
  std::set<std::string> ready;
  bool server_answered = false;
};

WaitResult WaitForNodes(const std::string& address, int want, const std::vector<pid_t>& children) {
  WaitResult r;
  auto stub = MakeStub(address);
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && !g_stop) {
    for (pid_t p : children) {
      if (waitpid(p, &r.status, WNOHANG) == p) {
        r.dead = p;
        return r;
      }
    }
    v1::ListNodesResponse resp;
    // Waits for the channel's next connection attempt (a server still
    // starting), not failing at once while the channel backs off.
    auto ctx = Context(2);
    ctx->set_wait_for_ready(true);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    if (stub->ListNodes(ctx.get(), v1::ListNodesRequest(), &resp).ok()) {
      r.server_answered = true;
      r.ready.clear();
      for (const auto& n : resp.nodes()) {
        if (n.info().state() == v1::NODE_READY) r.ready.insert(n.info().name());
      }
      if (static_cast<int>(r.ready.size()) >= want) {
        r.up = true;
        return r;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.status = -1;
  return r;
}

// The HTTP address a daemon logged (the server's "/metrics on
// http://HOST:PORT/" line, an agent's "/metrics on http://HOST:PORT/metrics")
// in `log` after byte `from`; "" when it logged none.
std::string HttpAddressIn(const std::string& log, size_t from) {
  std::string text = ReadFileText(log);
  const std::string marker = "/metrics on http://";
  size_t at = text.rfind(marker);
  if (at == std::string::npos || at < from) return "";
  size_t start = at + marker.size();
  size_t end = text.find('/', start);
  return end == std::string::npos ? "" : text.substr(start, end - start);
}

// A daemon of the cluster: what the terminal calls it, and its log.
struct Daemon {
  pid_t pid = -1;
  std::string what;
  std::string log;
};

// Prints why the cluster did not come up: the daemon that ended, else those
// that were not ready (the server when it never answered), with the end of
// each one's log, so the cause shows on the terminal.
void ReportStartFailure(const WaitResult& r, const std::vector<Daemon>& daemons) {
  for (const Daemon& d : daemons) {
    bool agent = d.what.rfind("agent ", 0) == 0;
    bool not_ready = agent ? r.server_answered && !r.ready.count(d.what.substr(6)) : !r.server_answered;
    if (r.dead >= 0 ? d.pid == r.dead : not_ready) {
      std::cerr << StartFailureText(d.what, d.pid == r.dead ? r.status : -1, d.log);
    }
  }
}

// The admin's token of the cluster in `root`: the one of ROOT/client.yaml
// when the server's token file still takes it, else a new one there. Written
// (with `address`) to ROOT/client.yaml, which the CLI run in the folder above
// finds (.trainyard/client.yaml) and TRAINYARD_CONFIG names elsewhere.
absl::StatusOr<std::string> AdminCredential(const std::string& root, const std::string& address,
                                            const std::string& ca_file) {
  std::string config_path = root + "/client.yaml";
  std::string tokens = security::TokenFilePath(root + "/server");
  absl::StatusOr<security::ClientConfig> before = security::LoadClientConfig(config_path);
  std::string token;
  if (before.ok() && !before->token.empty()) {
    absl::StatusOr<security::Principal> who = security::TokenStore(tokens).Authenticate("Bearer " + before->token);
    if (who.ok() && who->admin) token = before->token;
  }
  if (token.empty()) {
    absl::StatusOr<std::string> made = security::IssueToken(tokens, "admin", /*admin=*/true);
    if (!made.ok()) return made.status();
    token = *made;
  }
  if (absl::Status st =
          security::WriteClientConfig(config_path, {.server = address, .token = token, .ca_file = ca_file});
      !st.ok()) {
    return st;
  }
  return token;
}

// Checks a file flag of `up` and makes its path absolute (the daemons get
// it as given to `up`, wherever they run).
bool AbsoluteFile(const char* flag, std::string* path) {
  if (path->empty()) return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(*path, ec)) {
    std::cerr << "trainyard up: " << flag << " " << *path << ": no such file\n";
    return false;
  }
  *path = std::filesystem::absolute(*path, ec).string();
  return true;
}

// The account name of the uid running `up`; "" when it has none.
std::string OwnAccountName() {
  passwd pw, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return "";
  return found->pw_name;
}

// Who the cluster's tasks run as (ROOT/task-users, the agents'
// --task-user-map): up's admin principal ("admin") and the account that ran
// `up` (what the login socket calls it) run as that account; every other
// user as the local account of its own name (agent/task_user.h), or not at
// all when it has none. `extra` (up's --task-user-map) adds lines. The
// agents switch users only when `up` runs as root, and only then get
// --allow-root-tasks, which the two lines above use: another local
// account's jobs run as that account, never as root. False (said on
// stderr) when the file cannot be written or the lines do not parse.
bool TaskUserFlags(const std::string& root, const std::string& extra, std::vector<std::string>* flags) {
  std::string path = root + "/task-users";
  std::string text = absl::StrCat(
      "# Written by `trainyard up` at each start. Every user not named here runs its tasks as the local\n"
      "# account of its own name; add lines with `trainyard up --task-user-map FILE`.\n",
      "admin: ", getuid(), "\n");
  std::string self = OwnAccountName();
  if (!self.empty() && self != "admin") absl::StrAppend(&text, "\"", self, "\": ", getuid(), "\n");
  if (!extra.empty()) {
    absl::StatusOr<std::string> lines = security::ReadWholeFile(extra);
    if (!lines.ok()) {
      std::cerr << "trainyard up: --task-user-map " << extra << ": " << lines.status().message() << "\n";
      return false;
    }
    absl::StrAppend(&text, "# From ", extra, ":\n", *lines, "\n");
  }
  if (absl::StatusOr<agent::TaskUserMap> map = agent::TaskUserMap::Parse(text, path); !map.ok()) {
    std::cerr << "trainyard up: " << map.status().message() << " (up maps admin"
              << (self.empty() ? "" : " and " + self) << " itself)\n";
    return false;
  }
  if (absl::Status st = security::WritePrivateFile(path, text); !st.ok()) {
    std::cerr << "trainyard up: cannot write " << path << ": " << st.message() << "\n";
    return false;
  }
  flags->insert(flags->end(), {"--task-user-map", path});
  if (getuid() == 0) flags->push_back("--allow-root-tasks");
  return true;
}

// The cluster's certificates in ROOT/certs (security/certs.h): its CA (kept
// across runs), the server's and one per node, made anew each run (a few
// milliseconds: ECDSA keys). Errors are said on stderr.
bool ClusterCerts(const std::string& certs, int nodes) {
  absl::StatusOr<security::InitResult> init = security::InitCertDir(certs, {});
  absl::Status st = init.status();
  for (int i = 0; i < nodes && st.ok(); ++i) st = security::MakeNodeCert(certs, absl::StrCat("node-", i));
  if (!st.ok()) std::cerr << "trainyard up: certificates in " << certs << ": " << st.message() << "\n";
  return st.ok();
}

// This process's own calls (the wait, the demo) use the cluster's client
// config; its daemons do not get it (DaemonEnvironment). The demo's tasks
// find the example programs beside the binary and the checked-in specs'
// scripts.
void ExportClientEnvironment(const std::string& self, const std::string& root, UpFlags& f) {
  setenv("TRAINYARD_CONFIG", (root + "/client.yaml").c_str(), 1);
  unsetenv(kTokenEnv);
  unsetenv(kCaFileEnv);
  std::string examples = std::filesystem::path(self).parent_path().string() + "/examples";
  if (!getenv("TRAINYARD_EXAMPLES_BIN")) setenv("TRAINYARD_EXAMPLES_BIN", examples.c_str(), 1);
  // A task runs in its own directory, where a relative "examples" is nothing.
  if (std::string source = FindExamplesSourceDir(); !getenv("TRAINYARD_EXAMPLES_DIR") && !source.empty()) {
    setenv("TRAINYARD_EXAMPLES_DIR", source.c_str(), 1);
  }
  if (f.demo_spec.empty() && std::filesystem::exists(examples + "/demo.yaml")) f.demo_spec = examples + "/demo.yaml";
}

// The daemons `up` started, and where this run's lines of their logs begin
// (the logs are appended to across runs).
struct Cluster {
  pid_t server = -1;
  std::vector<pid_t> agents;
  std::vector<Daemon> daemons;
  size_t server_log_start = 0;
  std::vector<size_t> agent_log_starts;
};

// Starts the server and f.nodes agents with simulated GPUs, every channel
// TLS with the certificates in `certs`.
Cluster StartDaemons(const UpFlags& f, const std::string& self, const std::string& root, const std::string& address,
                     const std::string& certs, const std::vector<std::string>& task_user_flags) {
  Cluster c;
  std::vector<std::string> server_args = {self, "server", "--listen", address, "--data-dir", root + "/server",
                                          "--node-timeout-ms", "5000", "--kill-grace-ms", "3000", "--checkpoint-root",
                                          root + "/checkpoints", "--http-listen",
                                          absl::StrCat("127.0.0.1:", f.http_port), "--tls-dir", certs};
  c.server_log_start = ReadFileText(root + "/logs/server.log").size();
  if (!f.config.empty()) server_args.insert(server_args.end(), {"--config", f.config});
  if (!f.queue_config.empty()) server_args.insert(server_args.end(), {"--queue-config", f.queue_config});
  c.server = Spawn(server_args, root + "/logs/server.log");
  c.daemons = {{c.server, "server", root + "/logs/server.log"}};
  std::vector<core::PortRanges> ports = NodePortSlices(f.nodes);
  for (int i = 0; i < f.nodes; ++i) {
    std::string name = absl::StrCat("node-", i);
    std::vector<std::string> argv = {self, "agent", "--server", address, "--name", name, "--data-dir",
                                     root + "/" + name, "--simulate-gpus", absl::StrCat(f.gpus), "--gpu-topology",
                                     f.topology, "--memory-mb", absl::StrCat(f.node_memory_mb), "--vcores",
                                     absl::StrCat(f.node_vcores), "--rack", absl::StrCat("rack-", i / 4),
                                     "--address", NodeAddress(i), "--port-range", ports[i].ToString(),
                                     "--kill-tasks-on-exit", "--ca", security::CaCertPath(certs), "--cert",
                                     security::NodeCertPath(certs, name), "--key", security::NodeKeyPath(certs, name),
                                     "--http-listen", "127.0.0.1:0"};
    argv.insert(argv.end(), task_user_flags.begin(), task_user_flags.end());
    std::string log = absl::StrCat(root, "/logs/", name, ".log");
    c.agent_log_starts.push_back(ReadFileText(log).size());
    c.agents.push_back(Spawn(argv, log));
    c.daemons.push_back({c.agents.back(), "agent " + name, log});
  }
  return c;
}

// The cluster is up: prints the banner (with every /metrics address, also
// written for Prometheus), runs the demo, and serves until Ctrl-C. The
// demo's exit code.
int Serve(const UpFlags& f, const Cluster& c, const std::string& self, const std::string& root,
          const std::string& address, const std::string& admin_token) {
  std::string http = HttpAddressIn(root + "/logs/server.log", c.server_log_start);
  // Each agent logs its /metrics address before it registers.
  std::vector<std::pair<std::string, std::string>> agent_metrics;
  for (int i = 0; i < f.nodes; ++i) {
    std::string name = absl::StrCat("node-", i);
    agent_metrics.emplace_back(name, HttpAddressIn(absl::StrCat(root, "/logs/", name, ".log"), c.agent_log_starts[i]));
  }
  if (absl::Status st = WritePrometheusTargets(absl::StrCat(root, "/", kPrometheusTargetsFile), http, agent_metrics);
      !st.ok()) {
    std::cerr << "trainyard up: " << st.message() << "\n";
  }
  std::cout << BannerText({self, address, root, f.nodes, f.gpus, f.topology, FindExamplesDir(self), f.demo, http,
                           admin_token, agent_metrics})
            << std::flush;
  // After the demo the cluster stays up, so the banner's commands can be
  // tried; Ctrl-C stops it (the exit code is the demo's).
  int rc = f.demo ? RunDemo(address, f.demo_spec) : kExitOk;
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return rc;
}

// All agents at once: each tells the server it stops, so their jobs go back
// to the queue together instead of moving to a node about to stop too.
// A child already reaped is -1 here, and kill(-1, ...) would signal every
// process this user may signal: only live children are told.
void StopCluster(const Cluster& c) {
  std::cout << "stopping the cluster..." << std::endl;
  for (pid_t p : c.agents) {
    if (p > 0) kill(p, SIGTERM);
  }
  for (pid_t p : c.agents) StopChild(p, 10);
  StopChild(c.server, 10);
}

int RunUp(UpFlags& f) {
  std::string self = SelfPath();
  if (!AbsoluteFile("--config", &f.config) || !AbsoluteFile("--queue-config", &f.queue_config)) return kExitUsage;
  // Each simulated node gets the topology of its GPU count unless one is given.
  if (f.topology.empty()) f.topology = core::DefaultTopologySpec(f.gpus);
  std::string address = absl::StrCat("127.0.0.1:", f.port);
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir + "/logs", ec);
  std::filesystem::permissions(f.data_dir + "/logs", std::filesystem::perms::owner_all, ec);
  if (ec) {
    std::cerr << "trainyard up: cannot create " << f.data_dir << ": " << ec.message() << "\n";
    return kExitFailure;
  }
  std::string root = std::filesystem::absolute(f.data_dir).string();
  std::vector<std::string> task_user_flags;
  if (!TaskUserFlags(root, f.task_user_map, &task_user_flags)) return kExitFailure;
  // Every channel of the cluster is TLS; agents prove their node's name.
  std::string certs = root + "/certs";
  if (!ClusterCerts(certs, f.nodes)) return kExitFailure;
  absl::StatusOr<std::string> admin_token = AdminCredential(root, address, security::CaCertPath(certs));
  if (!admin_token.ok()) {
    std::cerr << "trainyard up: " << admin_token.status().message() << "\n";
    return kExitFailure;
  }
  ExportClientEnvironment(self, root, f);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  Cluster cluster = StartDaemons(f, self, root, address, certs, task_user_flags);
  std::vector<pid_t> all = cluster.agents;
  all.push_back(cluster.server);
  WaitResult waited = WaitForNodes(address, f.nodes, all);
  // A child the wait reaped is not signalled again (its pid may be reused).
  if (cluster.server == waited.dead) cluster.server = -1;
  for (pid_t& p : cluster.agents) p = p == waited.dead ? -1 : p;
  int rc = kExitOk;
  if (waited.up) {
    rc = Serve(f, cluster, self, root, address, *admin_token);
  } else {
    if (!g_stop) ReportStartFailure(waited, cluster.daemons);
    std::cerr << "trainyard up: the cluster did not come up; every log is in " << root << "/logs/\n";
    rc = kExitFailure;
  }
  StopCluster(cluster);
  return rc;
}

}  // namespace

void RegisterUp(CLI::App& app, int* exit_code) {
  static UpFlags f;
  auto* up = app.add_subcommand("up", "Start a local cluster (server + agents with simulated GPUs)");
  up->add_option("--nodes", f.nodes, "number of agents")->check(CLI::Range(1, 64));
  up->add_option("--gpus-per-node", f.gpus, "simulated GPUs per node")->check(CLI::Range(0, 64));
  up->add_option("--gpu-topology", f.topology,
                 "topology spec of each node (default: switches of 2 GPUs, split over 2 sockets from 4 GPUs)");
  up->add_option("--config", f.config, "the server's config file (YAML; docs/control-plane.md)");
  up->add_option("--queue-config", f.queue_config, "the server's queue tree (YAML), to try queues here");
  up->add_option("--data-dir", f.data_dir, "where state and logs go");
  // The agents' listener is the port above (server --agent-listen's
  // default), and both go into the config files up writes: a port is named.
  up->add_option("--port", f.port,
                 "server port on 127.0.0.1, 1-65534 (the agents' is the one above; up writes it into its client "
                 "config, so 0 is not taken)")
      ->check(CLI::Range(1, 65534));
  up->add_option("--http-port", f.http_port,
                 "dashboard, REST API and /metrics port on 127.0.0.1 (0 = a free port)")->check(CLI::Range(0, 65535));
  up->add_flag("--demo", f.demo, "also submit the demo job and follow it to the end");
  up->add_option("--demo-spec", f.demo_spec, "job spec the demo submits (default examples/demo.yaml)");
  up->add_option("--task-user-map", f.task_user_map,
                 "more `cluster-user: local-account` lines for the agents' task user map (when up runs as root; "
                 "docs/agent.md)");
  up->callback([exit_code] { *exit_code = RunUp(f); });
}

}  // namespace trainyard::cli
