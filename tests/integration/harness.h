// Test harness for integration tests: a real server and real agents as
// separate processes of the `trainyard` binary on loopback, each in a
// temporary directory, with free ports; the `trainyard` CLI run as a user
// would run it. Everything a test starts is stopped by PID.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "nlohmann/json.hpp"

namespace trainyard::testing {

// The trainyard binary under test ($TRAINYARD_BIN).
std::string TrainyardBin();

// The program's path on $PATH ("" when absent): Prometheus and promtool
// (Debian's prometheus package), etcd.
std::string ProgramOnPath(const std::string& name);

// A fresh temporary directory, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A child process in its own process group; stdout and stderr to `log`.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log);
  ~Process();
  pid_t pid() const { return pid_; }
  // SIGKILL to the process (not its group), then reap it.
  void Kill();
  // SIGTERM, wait up to `grace`, then SIGKILL.
  void Stop(absl::Duration grace = absl::Seconds(10));
  bool Running();
  // The exit status once Running() found it ended (-1 before, or when a
  // signal ended it).
  int exit_status() const { return exit_status_; }
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::string log_;
  bool reaped_ = false;
  int exit_status_ = -1;
};

// The result of running a CLI command to completion.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The admin token of every cluster this test process starts (security is on
// in every suite: each Cluster's server accepts it), and "Bearer TOKEN" for
// an authorization header or gRPC metadata. The first call also sets
// $TRAINYARD_TOKEN in this process, so every CLI it starts speaks as the
// admin unless told otherwise.
const std::string& AdminToken();
std::string AdminAuthorization();

// The cluster CA of every cluster this test process starts with TLS (the
// default, as `trainyard up` does): a certificate directory made once
// (security/certs.h) and a copy of its CA certificate that any uid may read.
// The first call also sets $TRAINYARD_CA_FILE in this process, so every CLI
// it starts verifies the server with it.
const std::string& ClusterCertDir();
const std::string& ClusterCaFile();
std::string ClusterCaPem();
// --ca/--cert/--key of an agent for node `name` (its certificate is made the
// first time).
std::vector<std::string> AgentTlsFlags(const std::string& name);

// Runs `trainyard ARGS...` and waits for it (up to `timeout`). The command
// runs with TRAINYARD_TOKEN=AdminToken() and TRAINYARD_CA_FILE=
// ClusterCaFile(); each of `env` then sets
// ("NAME=VALUE") or unsets ("NAME") a variable of its environment.
CommandResult RunCli(const std::vector<std::string>& args, absl::Duration timeout = absl::Seconds(60),
                     const std::vector<std::string>& env = {});
// RunCli's `env` for a cluster that `trainyard up --data-dir DATA_DIR`
// started: the admin credential up wrote (DATA_DIR/client.yaml), in place of
// this process's token, which that cluster does not hold.
std::vector<std::string> UpClientEnv(const std::string& data_dir);

// The same for any program: `argv[0]` is its absolute path (e.g.
// /usr/bin/setpriv, to run the CLI as another uid).
CommandResult RunCommandLine(const std::vector<std::string>& argv, absl::Duration timeout,
                             const std::vector<std::string>& env = {});

// Reads a whole file ("" when missing).
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);
// The integers of `text`, one per line (lines that are not one are skipped):
// what tasks appended to a file, a number a line.
std::vector<int64_t> NumberLines(const std::string& text);
// A shell command that waits until `path` exists: a task holds there until
// the test writes the file (the task's own business; no timer).
std::string WaitForFile(const std::string& path);

// The unprivileged uid tests run a second user as (`nobody`, with setpriv).
constexpr int kNobody = 65534;

// A port that was free a moment ago.
int FreePort();
// A port P such that P and P + 1 were both free a moment ago: for `up` and
// servers given only --port, whose agent listener takes the port above.
int FreePortPair();

struct ClusterOptions {
  int nodes = 2;
  int gpus = 8;
  std::string topology = "switches=0-1,2-3,4-5,6-7;sockets=0-3,4-7";
  int node_timeout_ms = 2000;
  int heartbeat_interval_ms = 200;
  // The server's --quiet-heartbeat-interval-ms. 0: every beat is sent, so
  // tests that judge how fresh a node's beats are see every one. Clusters
  // that `trainyard up` starts have quiet beats (1.25 s: a quarter of up's
  // 5 s node timeout).
  int quiet_heartbeat_interval_ms = 0;
  std::vector<std::string> server_flags;
  // The server's --data-dir; empty = <dir>/server.
  std::string server_data_dir;
  // Agents run with --kill-tasks-on-exit (tasks die with a stopped agent);
  // false leaves tasks running under their keepers for re-adoption.
  bool agents_kill_tasks_on_exit = true;
  std::vector<std::string> agent_flags;  // added to every agent's command line
  // The agents' --task-user-map content. Empty: every user to the uid
  // running the test, with --allow-root-tasks when that is root (so tests
  // need no accounts per user; `trainyard up` maps only its admin and its
  // own account so, tests/integration/up_root_test.cc).
  std::string task_user_map;
  // The server serves TLS (--tls-dir ClusterCertDir()) and agents present
  // their node's certificate; false: plaintext.
  bool tls = true;
};

// A server and `nodes` agents (node-0, node-1, ...).
class Cluster {
 public:
  explicit Cluster(ClusterOptions options = {});
  ~Cluster();

  const std::string& address() const { return address_; }
  // host:port of the server's agent listener (agents are given it with
  // --agent-server).
  const std::string& agent_address() const { return agent_address_; }
  // host:port of the server's HTTP API (it serves one on a free port).
  const std::string& http_address() const { return http_address_; }
  const std::string& dir() const { return dir_.path(); }
  // `trainyard ARGS... --server ADDRESS`, as the admin (`env` as RunCli's).
  CommandResult Cli(std::vector<std::string> args, const std::vector<std::string>& env = {});
  // `trainyard ARGS... --server ADDRESS` with `token` (a user's, from
  // UserToken) in place of the admin's.
  CommandResult CliAs(const std::string& token, std::vector<std::string> args);
  // A token for `user` (`trainyard token create USER`, as the admin); "" when
  // it failed.
  std::string UserToken(const std::string& user, bool admin = false);
  // Submits a spec (written to a file) and returns the job name.
  std::string Submit(const std::string& yaml);
  // `describe JOB -o json`.
  nlohmann::json Describe(const std::string& job);
  std::string JobState(const std::string& job);
  // Waits until the job's state is `state` (e.g. "SUCCEEDED").
  bool WaitForState(const std::string& job, const std::string& state, absl::Duration timeout = absl::Seconds(30));
  nlohmann::json Nodes();
  Process& agent(int i) { return *agents_[i]; }
  Process& server() { return *server_; }
  // Starts agent i again (after Kill / Stop), same name and data dir.
  void RestartAgent(int i);
  // The same with `gpus` simulated GPUs of `topology`: a node whose hardware
  // changed while it was away. A later RestartAgent(i) goes back to the
  // cluster's options.
  void RestartAgent(int i, int gpus, const std::string& topology);
  // SIGKILL to the server (its store is left as the crash left it).
  void KillServer();
  // Starts the server again on the same data dir and the same address (after
  // KillServer or a Stop); false when it did not come up (see its log).
  bool RestartServer();
  // Waits until `n` nodes are READY.
  bool WaitNodesReady(int n, absl::Duration timeout = absl::Seconds(20));
  // The server's data dir.
  std::string server_data_dir() const {
    return options_.server_data_dir.empty() ? dir() + "/server" : options_.server_data_dir;
  }

 private:
  void StartAgent(int i, int gpus, const std::string& topology);
  bool StartServer(const std::string& listen);
  ClusterOptions options_;
  TempDir dir_;
  std::string address_;
  std::string agent_address_;
  std::string http_address_;
  int port_base_ = 0;
  int port_lock_fd_ = -1;
  double started_uptime_ = 0;  // seconds since boot when the cluster was made
  // Kills the sessions of tasks that outlived their (SIGKILLed) agent.
  void KillLeftoverTasks();  // flock on the port block's lock file while this cluster lives
  std::unique_ptr<Process> server_;
  std::vector<std::unique_ptr<Process>> agents_;
};

// What several test files read from the CLI's JSON and the processes'
// files, named once.
// The task ROLE-INDEX of a `describe -o json` answer ({} when absent).
nlohmann::json Task(const nlohmann::json& describe, const std::string& role, int index = 0);
// Whether the job's events hold one of `kind` whose text contains `text`.
bool HasEvent(const nlohmann::json& describe, const std::string& kind, const std::string& text);
// The node `name` of `nodes -o json` ({} when absent).
nlohmann::json NodeNamed(Cluster& cluster, const std::string& name);
// The process ID a task wrote to `path` (0 when none yet).
int ReadPid(const std::string& path);
// Whether process `pid` exists and is not a zombie.
bool Alive(int pid);
// CLUSTER-DIR/out, made: where the tasks of a test write.
std::string MakeOut(const Cluster& cluster);

}  // namespace trainyard::testing
